package triggers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones even on hosts without /usr/share/zoneinfo

	"github.com/robfig/cron/v3"
)

// Trigger kinds.
const (
	KindSchedule = "schedule"
	KindWebhook  = "webhook"
)

// RedactedSecret is how responses show a webhook secret; sent back in a PATCH it means
// "keep the stored secret".
const RedactedSecret = "***"

// Webhook secret bounds: an HMAC key short enough to guess offline from one captured
// signature would make the signature worthless.
const (
	minSecretLen = 16
	maxSecretLen = 1024
	maxCronLen   = 200
)

// ScheduleConfig is the stored config of a schedule trigger.
type ScheduleConfig struct {
	// Cron is a standard 5-field expression (or @hourly, @daily, … descriptors).
	Cron string `json:"cron"`
	// Timezone is the IANA zone the expression is read in (default UTC).
	Timezone string `json:"timezone"`
	// Input is the run input of every firing (default {}).
	Input json.RawMessage `json:"input,omitempty"`
}

// schedule is a validated schedule config with its parsed expression.
type schedule struct {
	ScheduleConfig
	spec cron.Schedule
}

// crontab is the expression with its zone, as gocron and robfig read it.
func (c ScheduleConfig) crontab() string { return "CRON_TZ=" + c.Timezone + " " + c.Cron }

// input is the run input of a firing.
func (c ScheduleConfig) input() json.RawMessage {
	if len(c.Input) == 0 {
		return json.RawMessage(`{}`)
	}
	return c.Input
}

// decodeStrict decodes one JSON object into v refusing unknown keys and trailing data.
func decodeStrict(raw json.RawMessage, v any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return errors.New("is required")
	}
	if trimmed[0] != '{' {
		return errors.New("must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return errors.New("field " + te.Field + " has the wrong type")
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		return errors.New("is invalid: " + msg)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("is invalid: unexpected data after the object")
	}
	return nil
}

// parseSchedule validates a schedule config: the cron expression must parse and fire at
// least once in the next five years (robfig's search horizon), the zone must be an IANA
// name. now anchors the "ever fires" check.
func parseSchedule(raw json.RawMessage, now time.Time) (schedule, error) {
	var in struct {
		Cron     *string         `json:"cron"`
		Timezone *string         `json:"timezone"`
		Input    json.RawMessage `json:"input"`
	}
	if err := decodeStrict(raw, &in); err != nil {
		return schedule{}, invalid("config", "%s (schedule config is {cron, input?, timezone?})", err)
	}
	if in.Cron == nil || strings.TrimSpace(*in.Cron) == "" {
		return schedule{}, ErrInvalidCron.Msg("config.cron is required, e.g. \"0 9 * * 1-5\"").WithDetails(map[string]any{"field": "config.cron"})
	}
	c := ScheduleConfig{Cron: strings.Join(strings.Fields(*in.Cron), " "), Timezone: "UTC"}
	if in.Timezone != nil {
		tz := strings.TrimSpace(*in.Timezone)
		if tz == "" || tz == "Local" || strings.ContainsAny(tz, " \t") {
			return schedule{}, ErrInvalidTimezone.Msg("config.timezone %q is not an IANA zone name such as Europe/Paris", *in.Timezone).WithDetails(map[string]any{"field": "config.timezone"})
		}
		if _, err := time.LoadLocation(tz); err != nil {
			return schedule{}, ErrInvalidTimezone.Msg("config.timezone %q is not an IANA zone name such as Europe/Paris", tz).WithDetails(map[string]any{"field": "config.timezone"})
		}
		c.Timezone = tz
	}
	if err := checkCronText(c.Cron); err != nil {
		return schedule{}, err
	}
	spec, err := cron.ParseStandard(c.crontab())
	if err != nil {
		return schedule{}, cronError(c.Cron, err.Error())
	}
	if spec.Next(now).IsZero() {
		return schedule{}, cronError(c.Cron, "it never fires (no matching time in the next five years)")
	}
	if t := bytes.TrimSpace(in.Input); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, t); err != nil {
			return schedule{}, invalid("config.input", "is not valid JSON")
		}
		// Valid JSON can still fail to decode (1e400 overflows float64): every firing
		// would then fail, so refuse it now.
		var v any
		if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
			return schedule{}, invalid("config.input", "cannot be decoded: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		c.Input = buf.Bytes()
	}
	return schedule{ScheduleConfig: c, spec: spec}, nil
}

// checkCronText refuses forms that parse but do not fit a shared schedule.
func checkCronText(expr string) error {
	switch {
	case len(expr) > maxCronLen:
		return cronError(expr[:maxCronLen]+"…", "it is too long")
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return cronError(expr, "put the zone in config.timezone, not in the expression")
	case strings.HasPrefix(expr, "@every"):
		// @every counts from each process's start, so replicas would not agree on windows.
		return cronError(expr, "@every is not supported; use a cron expression such as */5 * * * *")
	}
	return nil
}

func cronError(expr, why string) error {
	return ErrInvalidCron.Msg("config.cron %q: %s", expr, why).WithDetails(map[string]any{"field": "config.cron"})
}

// parseWebhookSecret validates a webhook config and returns its secret. keep reports a
// secret of "***" (the redaction placeholder), allowed only when allowKeep is set (PATCH).
func parseWebhookSecret(raw json.RawMessage, allowKeep bool) (secret string, keep bool, err error) {
	var in struct {
		Secret *string `json:"secret"`
	}
	if err := decodeStrict(raw, &in); err != nil {
		return "", false, invalid("config", "%s (webhook config is {secret})", err)
	}
	if in.Secret == nil || *in.Secret == "" {
		return "", false, invalid("config.secret", "is required: the key of the HMAC-SHA256 signature in X-Service-Signature")
	}
	s := *in.Secret
	if s == RedactedSecret {
		if allowKeep {
			return "", true, nil
		}
		return "", false, invalid("config.secret", "must be the secret itself, not the placeholder %q", RedactedSecret)
	}
	if len(s) < minSecretLen || len(s) > maxSecretLen {
		return "", false, invalid("config.secret", "must be %d to %d bytes long", minSecretLen, maxSecretLen)
	}
	return s, false, nil
}

// window is the latest time of spec at or before now and after now-lookback: the window a
// firing at now belongs to. ok is false when the firing is later than lookback after it.
func window(spec cron.Schedule, now time.Time, lookback time.Duration) (time.Time, bool) {
	t := spec.Next(now.Add(-lookback))
	if t.IsZero() || t.After(now) {
		return time.Time{}, false
	}
	for {
		n := spec.Next(t)
		if n.IsZero() || n.After(now) {
			return t.UTC(), true
		}
		t = n
	}
}

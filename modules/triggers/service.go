// Package triggers starts runs of a pinned agent version unattended: on a cron schedule
// (gocron, one firing per window across replicas) or on an HMAC-signed webhook delivery.
// A webhook secret is write-only: encrypted at rest with SERVICE_SECRET_KEY, bound to its
// row, and never returned.
package triggers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/secrets"
	"gorm.io/gorm"
)

const idPrefix = "trg_"

var (
	idPattern   = regexp.MustCompile(`^trg_[0-9a-f]{32}$`)
	hashPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

const maxAgentIDLen = 200

// Trigger is a trigger as the API shows it. A webhook's config is {"secret":"***"}.
type Trigger struct {
	ID          string          `json:"id"`
	AgentID     string          `json:"agent_id"`
	Kind        string          `json:"kind"`
	Version     string          `json:"version,omitempty"`
	ContentHash string          `json:"content_hash,omitempty"`
	Config      json.RawMessage `json:"config"`
	Enabled     bool            `json:"enabled"`
	// HookPath is where a webhook trigger receives deliveries (POST).
	HookPath string `json:"hook_path,omitempty"`
	// LastFiredAt is the last schedule window that started a run.
	LastFiredAt *time.Time `json:"last_fired_at,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

type row struct {
	ID          string `gorm:"primaryKey"`
	AgentID     string
	Kind        string
	Version     *string
	ContentHash *string
	Config      string
	Secret      *string
	Enabled     bool
	Revision    int64
	LastFiredAt *time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func (row) TableName() string { return "triggers" }

// aad binds a webhook secret's ciphertext to its trigger: copied onto another row it does
// not decrypt.
func aad(id string) []byte { return []byte("trigger:" + id) }

// Options tune the service.
type Options struct {
	// Durable says durable mode (SERVICE_DURABLE=1) is on; without it a trigger on a
	// version that needs durable mode is refused at creation with durable_required.
	Durable bool
	// Now is the clock used to check that a cron expression ever fires (default time.Now).
	Now func() time.Time
}

// Service is the domain logic of triggers (no HTTP).
type Service struct {
	db   *database.DB
	keys *secrets.Keyring
	pins AgentPins
	runs RunStarter
	log  zerolog.Logger
	opts Options
}

// NewService builds the service; every dependency is required.
func NewService(db *database.DB, keys *secrets.Keyring, pins AgentPins, runs RunStarter, logger zerolog.Logger, opts Options) (*Service, error) {
	if db == nil || keys == nil || pins == nil || runs == nil {
		return nil, errors.New("triggers: nil dependency")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{db: db, keys: keys, pins: pins, runs: runs, log: logger, opts: opts}, nil
}

// CreateInput is the body of POST /triggers.
type CreateInput struct {
	AgentID     *string         `json:"agent_id"`
	Kind        *string         `json:"kind"`
	Version     *string         `json:"version"`
	ContentHash *string         `json:"content_hash"`
	Config      json.RawMessage `json:"config"`
	Enabled     *bool           `json:"enabled"`
}

// dbNow is the current time at the precision both dialects store, so that a response and
// a later read of the same row agree.
func dbNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return idPrefix + hex.EncodeToString(b[:])
}

// Create validates and stores a trigger. Checks run from the cheapest to the one that needs
// the agents store, and nothing is stored unless all pass.
func (s *Service) Create(ctx context.Context, in CreateInput) (Trigger, error) {
	if in.AgentID == nil || strings.TrimSpace(*in.AgentID) == "" {
		return Trigger{}, invalid("agent_id", "is required")
	}
	if len(*in.AgentID) > maxAgentIDLen {
		return Trigger{}, invalid("agent_id", "is longer than %d characters", maxAgentIDLen)
	}
	if in.Kind == nil || *in.Kind == "" {
		return Trigger{}, invalid("kind", "is required: %s or %s", KindSchedule, KindWebhook)
	}
	if *in.Kind != KindSchedule && *in.Kind != KindWebhook {
		return Trigger{}, invalid("kind", "must be %s or %s", KindSchedule, KindWebhook)
	}
	version, hash, err := checkPin(in.Version, in.ContentHash)
	if err != nil {
		return Trigger{}, err
	}
	id := newID()
	now := dbNow()
	r := row{ID: id, AgentID: *in.AgentID, Kind: *in.Kind, Enabled: true, Revision: 1, CreatedAt: now, UpdatedAt: now}
	if in.Enabled != nil {
		r.Enabled = *in.Enabled
	}
	switch r.Kind {
	case KindSchedule:
		sc, err := parseSchedule(in.Config, s.opts.Now())
		if err != nil {
			return Trigger{}, err
		}
		b, err := json.Marshal(sc.ScheduleConfig)
		if err != nil {
			return Trigger{}, err
		}
		r.Config = string(b)
	case KindWebhook:
		secret, _, err := parseWebhookSecret(in.Config, false)
		if err != nil {
			return Trigger{}, err
		}
		ct, err := s.keys.Encrypt([]byte(secret), aad(id))
		if err != nil {
			return Trigger{}, err
		}
		r.Config = "{}"
		r.Secret = &ct
	}
	pin, err := s.pins.ResolvePin(ctx, r.AgentID, version, hash)
	if err != nil {
		return Trigger{}, err
	}
	if pin.NeedsDurable && !s.opts.Durable {
		return Trigger{}, ErrDurableRequired.Msg("agent %q version %s has human, subgraph, loop or map nodes: it runs only in durable mode (SERVICE_DURABLE=1)", r.AgentID, pin.Version)
	}
	if version != "" {
		r.Version = &version
	} else {
		r.ContentHash = &hash
	}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		return Trigger{}, err
	}
	return view(r), nil
}

// checkPin enforces exactly one non-empty pin.
func checkPin(version, hash *string) (string, string, error) {
	switch {
	case version == nil && hash == nil:
		return "", "", ErrInvalidPin.Msg("pin exactly one of version or content_hash; neither was given")
	case version != nil && hash != nil:
		return "", "", ErrInvalidPin.Msg("pin exactly one of version or content_hash, not both")
	case version != nil:
		if *version == "" || len(*version) > 64 {
			return "", "", ErrInvalidPin.Msg("version must be 1 to 64 characters").WithDetails(map[string]any{"field": "version"})
		}
		return *version, "", nil
	default:
		if !hashPattern.MatchString(*hash) {
			return "", "", ErrInvalidPin.Msg("content_hash must be sha256: followed by 64 lowercase hex digits").WithDetails(map[string]any{"field": "content_hash"})
		}
		return "", *hash, nil
	}
}

// find loads a trigger by id; a malformed id is simply not found.
func (s *Service) find(ctx context.Context, tx *gorm.DB, id string) (row, error) {
	if !idPattern.MatchString(id) {
		return row{}, ErrTriggerNotFound
	}
	var r row
	err := tx.WithContext(ctx).Take(&r, "id = ?", id).Error
	if database.IsNotFound(err) {
		return row{}, ErrTriggerNotFound
	}
	return r, err
}

// Get returns one trigger.
func (s *Service) Get(ctx context.Context, id string) (Trigger, error) {
	r, err := s.find(ctx, s.db.DB, id)
	if err != nil {
		return Trigger{}, err
	}
	return view(r), nil
}

// Page is one page of a listing, newest first; Next is the cursor of the following page.
type Page struct {
	Triggers []Trigger `json:"triggers"`
	Next     string    `json:"next,omitempty"`
}

// List returns up to limit triggers created before the cursor, newest first, optionally
// only those of one agent.
func (s *Service) List(ctx context.Context, limit int, before, agentID string) (Page, error) {
	q, err := database.Keyset(s.db.WithContext(ctx), "created_at", limit, before)
	if err != nil {
		return Page{}, invalid("before", "is not a cursor from a previous page")
	}
	if agentID != "" {
		q = q.Where("agent_id = ?", agentID)
	}
	var rows []row
	if err := q.Find(&rows).Error; err != nil {
		return Page{}, err
	}
	p := Page{}
	rows, p.Next = database.NextPage(rows, limit, func(r row) database.Cursor { return database.Cursor{At: r.CreatedAt, ID: r.ID} })
	p.Triggers = make([]Trigger, 0, len(rows))
	for _, r := range rows {
		p.Triggers = append(p.Triggers, view(r))
	}
	return p, nil
}

// Update applies a PATCH body: only enabled and config may be present. config replaces the
// whole config, validated against the kind; a webhook secret of "***" keeps the stored one.
// Nothing changes on error.
func (s *Service) Update(ctx context.Context, id string, body []byte) (Trigger, error) {
	var fields map[string]json.RawMessage
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return Trigger{}, invalid("body", "must be a JSON object with enabled and/or config")
	}
	if !utf8.Valid(body) {
		// encoding/json keeps invalid bytes inside config.input (a json.RawMessage), and
		// PostgreSQL refuses them when the config is stored: refuse them here, on every dialect.
		return Trigger{}, invalid("body", "must be valid UTF-8")
	}
	if err := json.Unmarshal(body, &fields); err != nil {
		return Trigger{}, apperr.Invalid("malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := checkPatchFields(fields); err != nil {
		return Trigger{}, err
	}
	var enabled *bool
	if raw, ok := fields["enabled"]; ok {
		var b bool
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) || json.Unmarshal(raw, &b) != nil {
			return Trigger{}, invalid("enabled", "must be true or false")
		}
		enabled = &b
	}
	var out row
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		r, err := s.find(ctx, tx, id)
		if err != nil {
			return err
		}
		set := map[string]any{}
		if raw, ok := fields["config"]; ok {
			switch r.Kind {
			case KindSchedule:
				sc, err := parseSchedule(raw, s.opts.Now())
				if err != nil {
					return err
				}
				b, err := json.Marshal(sc.ScheduleConfig)
				if err != nil {
					return err
				}
				r.Config = string(b)
				set["config"] = r.Config
			case KindWebhook:
				secret, keep, err := parseWebhookSecret(raw, true)
				if err != nil {
					return err
				}
				if !keep {
					ct, err := s.keys.Encrypt([]byte(secret), aad(r.ID))
					if err != nil {
						return err
					}
					r.Secret = &ct
					set["secret"] = ct
				}
			}
		}
		if enabled != nil && *enabled != r.Enabled {
			r.Enabled = *enabled
			set["enabled"] = r.Enabled
		}
		if len(set) > 0 {
			r.Revision++
			r.UpdatedAt = dbNow()
			set["revision"] = r.Revision
			set["updated_at"] = r.UpdatedAt
			if err := tx.Model(&row{}).Where("id = ?", r.ID).Updates(set).Error; err != nil {
				return err
			}
		}
		out = r
		return nil
	})
	if err != nil {
		return Trigger{}, err
	}
	return view(out), nil
}

// immutableFields are trigger fields a PATCH may not carry.
var immutableFields = map[string]string{
	"id":            "is the trigger's identity",
	"agent_id":      "is immutable; create a new trigger instead",
	"kind":          "is immutable; create a new trigger instead",
	"version":       "is immutable (the pin); create a new trigger instead",
	"content_hash":  "is immutable (the pin); create a new trigger instead",
	"hook_path":     "is derived from the id",
	"last_fired_at": "is maintained by the scheduler",
	"created_at":    "is maintained by the service",
	"updated_at":    "is maintained by the service",
}

func checkPatchFields(fields map[string]json.RawMessage) error {
	if len(fields) == 0 {
		return invalid("body", "must set enabled and/or config")
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first bad field named is stable
	for _, k := range keys {
		if k == "enabled" || k == "config" {
			continue
		}
		if why, ok := immutableFields[k]; ok {
			return invalid(k, "cannot be changed: %s; PATCH takes only enabled and config", why)
		}
		return invalid(k, "is not a trigger field; PATCH takes only enabled and config")
	}
	return nil
}

// Delete removes a trigger; its schedule stops at once on this replica, and no replica can
// fire it any more (the firing claim needs the row).
func (s *Service) Delete(ctx context.Context, id string) error {
	if !idPattern.MatchString(id) {
		return ErrTriggerNotFound
	}
	res := s.db.WithContext(ctx).Where("id = ?", id).Delete(&row{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrTriggerNotFound
	}
	return nil
}

// Deliver handles POST /hooks/{id}. The order of the checks is part of the contract
// (docs/api.md): lookup (404), signature (401), enabled (409), body is JSON (400), then
// the run starts. Nothing about the trigger's state is revealed before the signature
// proves the caller holds the secret.
func (s *Service) Deliver(ctx context.Context, id string, body []byte, signature string) (string, error) {
	r, err := s.find(ctx, s.db.DB, id)
	if err != nil {
		return "", err
	}
	if r.Kind != KindWebhook || r.Secret == nil {
		return "", ErrTriggerNotFound
	}
	secret, err := s.keys.Decrypt(*r.Secret, aad(r.ID))
	if err != nil {
		s.log.Error().Str("trigger_id", r.ID).Msg("webhook secret cannot be decrypted with the configured keys")
		return "", ErrSecretUnavailable
	}
	if signature == "" {
		return "", ErrInvalidSignature.Msg("the %s header is required", SignatureHeader)
	}
	if !verifySignature(secret, body, signature) {
		return "", ErrInvalidSignature
	}
	if !r.Enabled {
		return "", ErrTriggerDisabled.Msg("trigger %s is disabled", r.ID)
	}
	if !json.Valid(body) || !utf8.Valid(body) {
		return "", apperr.Invalid("the body must be JSON (UTF-8): it is the run input")
	}
	runID, err := s.runs.StartTriggeredRun(ctx, runRequest(r, body))
	if err != nil {
		return "", err
	}
	s.log.Info().Str("trigger_id", r.ID).Str("run_id", runID).Msg("webhook started a run")
	return runID, nil
}

func runRequest(r row, input json.RawMessage) RunRequest {
	req := RunRequest{TriggerID: r.ID, AgentID: r.AgentID, Input: input}
	if r.Version != nil {
		req.Version = *r.Version
	}
	if r.ContentHash != nil {
		req.ContentHash = *r.ContentHash
	}
	return req
}

func view(r row) Trigger {
	t := Trigger{
		ID: r.ID, AgentID: r.AgentID, Kind: r.Kind, Enabled: r.Enabled,
		Config: json.RawMessage(r.Config), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	if r.Version != nil {
		t.Version = *r.Version
	}
	if r.ContentHash != nil {
		t.ContentHash = *r.ContentHash
	}
	if r.Kind == KindWebhook {
		t.Config = json.RawMessage(`{"secret":"` + RedactedSecret + `"}`)
		t.HookPath = "/hooks/" + r.ID
	} else if !json.Valid(t.Config) {
		t.Config = json.RawMessage(`{}`) // only a hand-edited row gets here; not a 500
	}
	if r.LastFiredAt != nil {
		at := r.LastFiredAt.UTC()
		t.LastFiredAt = &at
	}
	return t
}

// scheduled is a schedule trigger as the scheduler loads it.
type scheduled struct {
	row
	sched schedule
}

// schedules loads every enabled schedule trigger. A row whose config no longer parses
// (hand-edited) is logged and skipped rather than stopping the others.
func (s *Service) schedules(ctx context.Context) ([]scheduled, error) {
	var rows []row
	if err := s.db.WithContext(ctx).Where("kind = ? AND enabled = ?", KindSchedule, true).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]scheduled, 0, len(rows))
	for _, r := range rows {
		sc, err := parseSchedule(json.RawMessage(r.Config), s.opts.Now())
		if err != nil {
			s.log.Warn().Str("trigger_id", r.ID).Err(err).Msg("schedule trigger has an invalid config; not scheduled")
			continue
		}
		out = append(out, scheduled{row: r, sched: sc})
	}
	return out, nil
}

// claim records window w as fired for trigger id at revision rev. It succeeds for exactly
// one caller per window across every replica and process: the conditional update needs the
// trigger to exist, be enabled, be unchanged since the caller loaded it, and not have fired
// this window (or a later one) yet.
func (s *Service) claim(ctx context.Context, id string, rev int64, w time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&row{}).
		Where("id = ? AND kind = ? AND enabled = ? AND revision = ? AND (last_fired_at IS NULL OR last_fired_at < ?)", id, KindSchedule, true, rev, w).
		UpdateColumn("last_fired_at", w)
	if res.Error != nil {
		return false, res.Error
	}
	return res.RowsAffected == 1, nil
}

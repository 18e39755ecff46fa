package triggers

import "github.com/svc-dev/svc/platform/apperr"

// Named error codes of the triggers module (docs/api.md, "Triggers").
var (
	// ErrTriggerNotFound answers an unknown trigger id, and POST /hooks/{id} for an id that
	// is not a webhook trigger (SPEC.md).
	ErrTriggerNotFound = apperr.NotFound("trigger_not_found", "trigger not found")
	// ErrInvalidSignature answers a webhook delivery whose X-Service-Signature is missing,
	// malformed or wrong.
	ErrInvalidSignature = apperr.Unauthorized("invalid_signature", "X-Service-Signature is missing or does not match the body")
	// ErrTriggerDisabled answers a correctly signed webhook delivery to a disabled trigger.
	ErrTriggerDisabled = apperr.Conflict("trigger_disabled", "trigger is disabled")
	// ErrInvalidPin answers a create that pins neither or both of version and content_hash.
	ErrInvalidPin = apperr.BadRequest("invalid_pin", "pin exactly one of version or content_hash")
	// ErrInvalidCron answers a schedule whose cron expression does not parse or never fires.
	ErrInvalidCron = apperr.BadRequest("invalid_cron", "invalid cron expression")
	// ErrInvalidTimezone answers a schedule whose timezone is not an IANA zone name.
	ErrInvalidTimezone = apperr.BadRequest("invalid_timezone", "invalid timezone")
	// ErrDurableRequired answers a trigger on an agent version that needs durable mode
	// (human, subgraph, loop or map nodes) while SERVICE_DURABLE is off.
	ErrDurableRequired = apperr.BadRequest("durable_required", "this agent version needs durable mode (SERVICE_DURABLE=1)")
	// ErrSecretUnavailable answers a webhook delivery whose stored secret cannot be
	// decrypted with the configured SERVICE_SECRET_KEY (a server configuration problem).
	ErrSecretUnavailable = apperr.Unavailable("trigger_secret_unavailable", "the trigger's secret cannot be decrypted with the configured SERVICE_SECRET_KEY; set config.secret again")
)

// invalid is a 400 invalid_request naming the bad field.
func invalid(field, format string, args ...any) error {
	return apperr.ErrInvalidRequest.Msg(field+" "+format, args...).WithDetails(map[string]any{"field": field})
}

package sessions

import "github.com/svc-dev/svc/platform/apperr"

// Named error codes of the sessions module.
var (
	// ErrSessionNotFound answers an unknown session id.
	ErrSessionNotFound = apperr.NotFound("session_not_found", "session not found")
)

// invalid is a 400 invalid_request naming the bad field.
func invalid(field, format string, args ...any) error {
	return apperr.ErrInvalidRequest.Msg(field+" "+format, args...).WithDetails(map[string]any{"field": field})
}

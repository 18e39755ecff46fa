package runs

import "github.com/svc-dev/svc/platform/apperr"

// Named error codes of the runs module.
var (
	// ErrRunNotFound answers an unknown run id.
	ErrRunNotFound = apperr.NotFound("run_not_found", "run not found")
	// ErrDurableRequired answers a run of a graph holding human, subgraph, loop or map nodes
	// outside durable mode's endpoint.
	ErrDurableRequired = apperr.BadRequest("durable_required", "this graph needs durable mode")
	// ErrUnauthorized answers POST /agents/{id}/invoke without the matching bearer token.
	ErrUnauthorized = apperr.Unauthorized("unauthorized", "a valid bearer token is required")
	// ErrClientDisconnected is how a non-durable run ends when its caller goes away: the run
	// is cancelled with the request.
	ErrClientDisconnected = apperr.New(499, "client_disconnected", "the client disconnected; the run was cancelled with its request")
	// ErrInterrupted is how the startup sweep (and a shutdown) ends runs left in flight.
	ErrInterrupted = apperr.Unavailable("interrupted", InterruptedMessage)
)

// InterruptedMessage is the error text the startup sweep records (SPEC.md).
const InterruptedMessage = "interrupted: control-plane restarted while run was in-flight"

// invalid is a 400 invalid_request naming the bad field.
func invalid(field, format string, args ...any) error {
	return apperr.ErrInvalidRequest.Msg(field+" "+format, args...).WithDetails(map[string]any{"field": field})
}

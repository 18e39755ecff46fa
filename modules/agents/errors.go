package agents

import "github.com/svc-dev/svc/platform/apperr"

// Named error codes of the agents module.
var (
	// ErrInvalidIR answers an IR that fails validation; details.problems lists every problem.
	ErrInvalidIR = apperr.BadRequest("invalid_ir", "invalid graph")
	// ErrAgentExists answers POST /agents with an id already in use.
	ErrAgentExists = apperr.Conflict("agent_exists", "an agent with this id already exists")
	// ErrAgentNotFound answers an unknown agent id.
	ErrAgentNotFound = apperr.NotFound("agent_not_found", "agent not found")
	// ErrVersionNotFound answers an unknown version of a known agent.
	ErrVersionNotFound = apperr.NotFound("version_not_found", "version not found")
	// ErrVersionConflict answers a publish of different content under an existing version.
	ErrVersionConflict = apperr.Conflict("version_conflict", "this version already exists with different content")
)

// invalid is a 400 invalid_request naming the bad field.
func invalid(field, format string, args ...any) error {
	return apperr.ErrInvalidRequest.Msg(field+" "+format, args...).WithDetails(map[string]any{"field": field})
}

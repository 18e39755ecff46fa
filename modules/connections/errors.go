package connections

import "github.com/svc-dev/svc/platform/apperr"

// Named error codes of the connections module. The Resolve errors end up as the code of a
// tool node's err value, so each names its cause.
var (
	// ErrConnectionExists answers a create with a name already in use.
	ErrConnectionExists = apperr.Conflict("connection_exists", "a connection with this name already exists")
	// ErrConnectionNotFound answers an unknown id or name (also from Resolve: a deleted connection).
	ErrConnectionNotFound = apperr.NotFound("connection_not_found", "connection not found")
	// ErrConnectionDisabled comes from Resolve for a connection with enabled=false.
	ErrConnectionDisabled = apperr.Conflict("connection_disabled", "connection is disabled")
	// ErrConnectionUndecryptable comes from Resolve when the stored secret cannot be decrypted
	// with the configured keys (typically its key was removed from SERVICE_SECRET_KEY).
	ErrConnectionUndecryptable = apperr.Unprocessable("connection_undecryptable", "connection secret cannot be decrypted with the configured SERVICE_SECRET_KEY; set the secret again")
	// ErrConnectionNoSecret comes from Resolve for a connection that has no secret to apply.
	ErrConnectionNoSecret = apperr.Unprocessable("connection_no_secret", "connection has no secret")
)

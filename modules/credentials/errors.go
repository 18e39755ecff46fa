package credentials

import "github.com/svc-dev/svc/platform/apperr"

// Named error codes of the credential store.
var (
	// ErrCredential is SPEC's 502 for a credentialRef that cannot be resolved. Its message
	// names the ref, never a value.
	ErrCredential = apperr.BadGateway("credential_error", "credential reference could not be resolved")
	// ErrInvalidName rejects a credential name that is not an environment-variable-style name.
	ErrInvalidName = apperr.BadRequest("invalid_credential_name", "invalid credential name")
	// ErrInvalidValue rejects an empty or oversized value.
	ErrInvalidValue = apperr.BadRequest("invalid_credential_value", "invalid credential value")
	// ErrInvalidRef rejects a credentialRef that is not secret://NAME.
	ErrInvalidRef = apperr.BadRequest("invalid_credential_ref", "invalid credential reference")
	// ErrNotFound is a DELETE of a name that is not stored.
	ErrNotFound = apperr.NotFound("credential_not_found", "credential not found")
)

package models

import (
	"net/http"

	"github.com/svc-dev/svc/platform/apperr"
)

// Named error codes of the model registry.
var (
	// ErrModelNotFound is SPEC's 404 for a model field that is not a registered logical id.
	ErrModelNotFound = apperr.NotFound("model_not_found", "model not found")
	// ErrInvalidModelID rejects a logical id outside the documented format.
	ErrInvalidModelID = apperr.BadRequest("invalid_model_id", "invalid logical model id")
	// ErrUnknownBinding rejects a binding this build does not know.
	ErrUnknownBinding = apperr.BadRequest("unknown_binding", "unknown binding")
	// ErrInvalidBaseURL rejects a baseUrl that is not a plain http(s) URL.
	ErrInvalidBaseURL = apperr.BadRequest("invalid_base_url", "invalid baseUrl")
	// ErrInvalidCredentialRef rejects a credentialRef that is not secret://NAME.
	ErrInvalidCredentialRef = apperr.BadRequest("invalid_credential_ref", "invalid credentialRef")
	// ErrInvalidMaxTokens rejects a maxTokens that is not a positive integer.
	ErrInvalidMaxTokens = apperr.BadRequest("invalid_max_tokens", "invalid maxTokens")
	// ErrInvalidModality rejects an unknown or repeated modality.
	ErrInvalidModality = apperr.BadRequest("invalid_modality", "invalid modality")
	// ErrInvalidModel rejects a registration missing a required field for its binding.
	ErrInvalidModel = apperr.BadRequest("invalid_model", "invalid model registration")
	// ErrUnknownAction is a POST /admin/models/{id}:<action> with an action other than warm or evict.
	ErrUnknownAction = apperr.NotFound("unknown_action", "unknown model action")
	// ErrUpstreamUnreachable is a probe whose upstream could not be reached.
	ErrUpstreamUnreachable = apperr.BadGateway("upstream_unreachable", "upstream unreachable")
	// ErrUpstreamTimeout is a probe whose upstream did not answer in time.
	ErrUpstreamTimeout = apperr.New(http.StatusGatewayTimeout, "upstream_timeout", "upstream timed out")
	// ErrUpstreamError is a probe whose basic chat request the upstream refused.
	ErrUpstreamError = apperr.BadGateway("upstream_error", "upstream returned an error")
)

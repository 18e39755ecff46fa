package artifacts

import "github.com/svc-dev/svc/platform/apperr"

// Named error codes of the artifacts module.
var (
	// ErrArtifactNotFound answers a ref that is malformed, not art_*, or unknown.
	ErrArtifactNotFound = apperr.NotFound("artifact_not_found", "artifact not found")
	// ErrInvalidContentType answers an upload whose Content-Type is not a media type.
	ErrInvalidContentType = apperr.BadRequest("invalid_content_type", "Content-Type is not a valid media type")
)

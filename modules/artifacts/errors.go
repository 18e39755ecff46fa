package artifacts

import "github.com/svc-dev/svc/platform/apperr"

// Named error codes of the artifacts module.
var (
	// ErrArtifactNotFound answers a ref that is malformed, not art_*, or unknown.
	ErrArtifactNotFound = apperr.NotFound("artifact_not_found", "artifact not found")
	// ErrInvalidContentType answers an upload whose Content-Type is not a media type.
	ErrInvalidContentType = apperr.BadRequest("invalid_content_type", "Content-Type is not a valid media type")
	// ErrRangeNotSatisfiable answers a Range header that does not overlap the blob.
	ErrRangeNotSatisfiable = apperr.New(416, "range_not_satisfiable", "the requested range is not satisfiable")
	// ErrPreconditionFailed answers an If-Match or If-Unmodified-Since that does not hold.
	ErrPreconditionFailed = apperr.New(412, "precondition_failed", "a precondition in the request headers does not hold")
)

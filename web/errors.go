package web

import "github.com/svc-dev/svc/platform/apperr"

// Error codes of the UI module (its static files and the inference pass-through).
var (
	// ErrAssetNotFound answers a path under /ui/ that names no embedded file.
	ErrAssetNotFound = apperr.NotFound("not_found", "no such UI file")
	// ErrNotProxied answers a /ui/inference/ path outside /admin/* and /v1/models.
	ErrNotProxied = apperr.NotFound("not_found", "only /admin/* and /v1/models of the inference plane are passed through")
	// ErrInferenceUnavailable answers when the inference plane cannot be reached.
	ErrInferenceUnavailable = apperr.Unavailable("inference_unavailable", "the inference plane is unreachable")
)

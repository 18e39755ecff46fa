package catalog

import (
	"net/http"

	"github.com/svc-dev/svc/platform/apperr"
)

// Error codes of the model catalog.
var (
	// ErrInvalidRepo rejects a repository name that is not owner/name (or tries to leave the models folder).
	ErrInvalidRepo = apperr.BadRequest("invalid_repo", "repository must be owner/name")
	// ErrUnknownEngine rejects an engine this catalog cannot install for.
	ErrUnknownEngine = apperr.BadRequest("unknown_engine", "unknown engine")
	// ErrInvalidLogicalID rejects a logical id that the model registry would not accept.
	ErrInvalidLogicalID = apperr.BadRequest("invalid_model_id", "invalid logical id")
	// ErrRepoNotFound is a repository the hub does not know (or that has no runnable files).
	ErrRepoNotFound = apperr.NotFound("repo_not_found", "repository not found")
	// ErrVariantNotFound is a variant id the repository does not have.
	ErrVariantNotFound = apperr.NotFound("variant_not_found", "variant not found")
	// ErrLogicalIDExists is an install whose logical id is already registered (or being installed).
	ErrLogicalIDExists = apperr.Conflict("logical_id_exists", "logical id already registered")
	// ErrDownloadNotFound is an unknown job id.
	ErrDownloadNotFound = apperr.NotFound("download_not_found", "download job not found")
	// ErrDownloadFinished is a cancel of a job that already ended.
	ErrDownloadFinished = apperr.Conflict("download_finished", "download job already finished")
	// ErrInsufficientStorage is an install whose files do not fit on the data folder's disk.
	ErrInsufficientStorage = apperr.New(http.StatusInsufficientStorage, "insufficient_storage", "not enough disk space for the model")
	// ErrHubUnavailable is a hub that cannot be reached or answered unexpectedly.
	ErrHubUnavailable = apperr.BadGateway("hub_unavailable", "model hub unavailable")
)

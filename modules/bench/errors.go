package bench

import "github.com/svc-dev/svc/platform/apperr"

// Named error codes of the bench store.
var (
	// ErrResultNotFound answers an unknown bench result id (GET /bench/runs/{id}, compare).
	ErrResultNotFound = apperr.NotFound("bench_result_not_found", "bench result not found")
	// ErrPresetExists answers POST /bench/presets with a name already in use.
	ErrPresetExists = apperr.Conflict("preset_exists", "a preset with this name already exists")
	// ErrPresetNotFound answers an unknown preset name.
	ErrPresetNotFound = apperr.NotFound("preset_not_found", "preset not found")
	// ErrSuiteExists answers POST /bench/suites with an id already in use.
	ErrSuiteExists = apperr.Conflict("suite_exists", "a suite with this id already exists")
	// ErrSuiteNotFound answers an unknown suite id, in a path or in a recorded result.
	ErrSuiteNotFound = apperr.NotFound("suite_not_found", "suite not found")
	// ErrCaseNotFound answers a result whose case_id is not a case of its suite.
	ErrCaseNotFound = apperr.NotFound("case_not_found", "case not found in the suite")
	// ErrDuplicateCaseID answers a suite whose cases repeat an id.
	ErrDuplicateCaseID = apperr.BadRequest("duplicate_case_id", "case ids must be unique within a suite")
)

// invalid is a 400 invalid_request naming the bad field.
func invalid(field, format string, args ...any) *apperr.Error {
	return apperr.ErrInvalidRequest.Msg(field+" "+format, args...).WithDetails(map[string]any{"field": field})
}

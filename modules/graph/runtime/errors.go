package runtime

import "github.com/svc-dev/svc/platform/apperr"

// Run-failing error codes. Each carries details {node, ...} naming the (namespaced) node.
var (
	ErrTemplate        = apperr.Unprocessable("template_error", "a template token did not resolve")
	ErrRouter          = apperr.Unprocessable("router_error", "router select matched no declared handle")
	ErrTransform       = apperr.Unprocessable("transform_error", "transform expression failed")
	ErrGuardrail       = apperr.Unprocessable("guardrail_error", "guardrail check could not be evaluated")
	ErrAmbiguousOutput = apperr.Unprocessable("ambiguous_output", "a second output node executed in one run")
	ErrSubgraph        = apperr.Unprocessable("subgraph_error", "subgraph agent could not be loaded")
	ErrInvalidGraph    = apperr.BadRequest("invalid_ir", "graph cannot be executed")
	ErrCheckpoint      = apperr.Unavailable("checkpoint_error", "node result could not be checkpointed")
	ErrCanceled        = apperr.Unavailable("run_canceled", "run canceled")
)

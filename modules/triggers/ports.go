package triggers

import (
	"context"
	"encoding/json"
)

// Pin is what a trigger's pin resolves to at creation.
type Pin struct {
	// Version and ContentHash identify the resolved agent version (both filled).
	Version     string
	ContentHash string
	// NeedsDurable says the version holds human, subgraph, loop or map nodes.
	NeedsDurable bool
}

// AgentPins resolves a pin (exactly one of version and contentHash non-empty) of an agent.
// An unknown agent, version or content hash is a 404 *apperr.Error (the agents module's
// agent_not_found / version_not_found), which the create handler passes through.
type AgentPins interface {
	ResolvePin(ctx context.Context, agentID, version, contentHash string) (Pin, error)
}

// RunRequest is one run a trigger starts: the trigger's pin as stored (exactly one of
// Version and ContentHash), its input, and TriggerID for the run record.
type RunRequest struct {
	TriggerID   string
	AgentID     string
	Version     string
	ContentHash string
	Input       json.RawMessage
}

// RunStarter starts a background (non-streaming) run and returns its id once the run is
// recorded; the run goes on after the call returns and after ctx ends. The composition
// root's implementation decides the mode: a durable run when durable mode is on and the
// pinned version needs it, else an in-process run. Client-facing failures are
// *apperr.Error values, passed through to the webhook caller.
type RunStarter interface {
	StartTriggeredRun(ctx context.Context, r RunRequest) (runID string, err error)
}

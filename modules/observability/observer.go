package observability

import (
	"context"
	"time"
)

// RunInfo describes a run as it starts. It mirrors the runs module's type field for field, so
// the composition root converts one into the other without this package importing runs.
type RunInfo struct {
	RunID       string
	AgentID     string // empty for ad-hoc graph and prompt runs
	Version     string
	ContentHash string
	SessionID   string
	TriggerID   string
	Kind        string // how the run was started (agent, graph, prompt, durable, …)
	Durable     bool
	// StartedAt is when the run was created; it stays the same across resumes, so the run
	// span keeps its start.
	StartedAt time.Time
}

// RunOutcome is how a run ended (or parked).
type RunOutcome struct {
	Status       string // completed, failed or waiting
	Note         string
	ErrorCode    string
	ErrorMessage string
	Output       any
	CompletedAt  time.Time
}

// Policy is the I/O capture policy applied to a run's node payloads.
type Policy struct {
	// Capture is off, metadata or full.
	Capture string
	// RetentionSeconds bounds how long full payloads are kept; nil keeps them.
	RetentionSeconds *int64
	// Redact returns a copy of a decoded JSON value with the agent's redact rules applied;
	// nil leaves values as they are.
	Redact func(v any) any
}

// Capture levels (the agents module's io_capture values).
const (
	CaptureOff      = "off"
	CaptureMetadata = "metadata"
	CaptureFull     = "full"
)

// DefaultPolicy is the policy of runs without an agent (ad-hoc graphs and prompts) and of every
// run when no PolicySource is configured: metadata only, the agents module's default.
func DefaultPolicy() Policy { return Policy{Capture: CaptureMetadata} }

// PolicySource returns the I/O policy of an agent; the agents module's service satisfies it
// through a small adapter in the composition root.
type PolicySource interface {
	IOPolicy(ctx context.Context, agentID string) (Policy, error)
}

// RunLookup reads the runs table through the runs module: whether a run exists and its status.
// It lets trace reads answer an empty trace (not a 404) for a run that has recorded no span.
type RunLookup interface {
	RunStatus(ctx context.Context, runID string) (status string, found bool, err error)
}

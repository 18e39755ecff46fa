package observability

import (
	"context"
	"encoding/json"
	"time"

	"github.com/svc-dev/svc/platform/apperr"
)

// ErrRunNotFound answers trace and I/O reads of a run nobody knows; the code is the runs
// module's, so GET /runs/{id} and GET /runs/{id}/trace agree.
var ErrRunNotFound = apperr.NotFound("run_not_found", "run not found")

// ErrNodeNotFound answers an I/O read of a node the run has no span for.
var ErrNodeNotFound = apperr.NotFound("node_not_found", "node not found in this run")

// Gate reasons of GET /runs/{id}/nodes/{node_id}/io: a 200 with one of these instead of payloads.
const (
	ReasonCaptureOff       = "capture_off"       // the agent's policy captured nothing
	ReasonMetadataOnly     = "metadata_only"     // the policy keeps port types and sizes only
	ReasonRetentionExpired = "retention_expired" // io_retention_seconds passed; payloads purged
	ReasonNodeSkipped      = "node_skipped"      // dead path: the node never ran
	ReasonNodeRunning      = "node_running"      // no result yet
	ReasonTooLarge         = "too_large"         // a payload exceeded the capture size limit
	ReasonNotCaptured      = "not_captured"      // nothing recorded (restored from a checkpoint elsewhere, unencodable, …)
)

// NodeIO is the response of GET /runs/{id}/nodes/{node_id}/io.
type NodeIO struct {
	RunID      string              `json:"run_id"`
	NodeID     string              `json:"node_id"`
	Captured   bool                `json:"captured"`
	Reason     string              `json:"reason,omitempty"`
	Input      json.RawMessage     `json:"input,omitempty"`
	Output     json.RawMessage     `json:"output,omitempty"`
	InputMeta  map[string]PortMeta `json:"input_meta,omitempty"`
	OutputMeta map[string]PortMeta `json:"output_meta,omitempty"`
	CapturedAt *time.Time          `json:"captured_at,omitempty"`
	ExpiresAt  *time.Time          `json:"expires_at,omitempty"`
}

// Service answers the read side: trees, stream history and node I/O.
type Service struct {
	rec  *Recorder
	runs RunLookup
	now  func() time.Time
}

// NewService builds the read side over a recorder; runs may be nil (then a run is known only
// by its trace).
func NewService(rec *Recorder, runs RunLookup) *Service {
	if rec == nil {
		panic("observability: nil recorder")
	}
	return &Service{rec: rec, runs: runs, now: rec.opts.Now}
}

// runState is what the read side knows about a run.
type runState struct {
	spans []Span
	// terminal is the run's final span status (ok or error) once it has ended, "" otherwise.
	terminal string
}

// load flushes the run's buffer (when it is live here) and reads its spans; unknown runs give
// ErrRunNotFound.
func (s *Service) load(ctx context.Context, runID string) (runState, error) {
	if err := s.rec.FlushRun(ctx, runID); err != nil {
		return runState{}, err
	}
	spans, err := s.rec.store.spans(ctx, runID)
	if err != nil {
		return runState{}, err
	}
	st := runState{spans: spans}
	rootID := SpanID(runID, "")
	for _, sp := range spans {
		if sp.SpanID == rootID && (sp.Status == StatusOK || sp.Status == StatusError) {
			st.terminal = sp.Status
		}
	}
	if len(spans) > 0 || s.rec.Live(runID) {
		return st, nil
	}
	row, err := s.rec.store.traceRun(ctx, runID)
	if err != nil {
		return runState{}, err
	}
	if row != nil {
		return st, nil
	}
	if s.runs != nil {
		status, ok, err := s.runs.RunStatus(ctx, runID)
		if err != nil {
			return runState{}, err
		}
		if ok {
			// A run with no recorded span (started before tracing, or not yet begun).
			switch status {
			case "completed":
				st.terminal = StatusOK
			case "failed":
				st.terminal = StatusError
			}
			return st, nil
		}
	}
	return runState{}, ErrRunNotFound.WithDetails(map[string]any{"run_id": runID})
}

// Trace returns the run's span tree.
func (s *Service) Trace(ctx context.Context, runID string) (Trace, error) {
	st, err := s.load(ctx, runID)
	if err != nil {
		return Trace{}, err
	}
	return BuildTree(runID, st.spans), nil
}

// NodeIO returns a node's captured input and output, or the reason they are not available.
func (s *Service) NodeIO(ctx context.Context, runID, nodeID string) (NodeIO, error) {
	if _, err := s.load(ctx, runID); err != nil {
		return NodeIO{}, err
	}
	sp, err := s.rec.store.nodeSpan(ctx, runID, nodeID)
	if err != nil {
		return NodeIO{}, err
	}
	if sp == nil || (sp.Kind != KindNode && sp.Kind != KindIteration) {
		return NodeIO{}, ErrNodeNotFound.WithDetails(map[string]any{"run_id": runID, "node_id": nodeID})
	}
	out := NodeIO{RunID: runID, NodeID: nodeID}
	if sp.Status == StatusSkipped {
		out.Reason = ReasonNodeSkipped
		return out, nil
	}
	tr, err := s.rec.store.traceRun(ctx, runID)
	if err != nil {
		return NodeIO{}, err
	}
	if tr != nil && tr.IOCapture == CaptureOff {
		out.Reason = ReasonCaptureOff
		return out, nil
	}
	row, err := s.rec.store.nodeIO(ctx, runID, nodeID)
	if err != nil {
		return NodeIO{}, err
	}
	if row == nil {
		out.Reason = ReasonNotCaptured
		if sp.Status == StatusRunning {
			out.Reason = ReasonNodeRunning
		}
		return out, nil
	}
	_ = json.Unmarshal([]byte(row.InputMeta), &out.InputMeta) // written by ioRows
	_ = json.Unmarshal([]byte(row.OutputMeta), &out.OutputMeta)
	at := row.CapturedAt.UTC()
	out.CapturedAt = &at
	switch row.Capture {
	case CaptureMetadata:
		out.Reason = ReasonMetadataOnly
		return out, nil
	case captureTooLarge:
		out.Reason = ReasonTooLarge
		return out, nil
	case CaptureFull:
	default:
		out.Reason = ReasonNotCaptured
		return out, nil
	}
	if row.ExpiresAt != nil {
		exp := row.ExpiresAt.UTC()
		out.ExpiresAt = &exp
	}
	// Past its retention the payload is gone even if the purge has not run yet.
	if row.PurgedAt != nil || (row.ExpiresAt != nil && !s.now().Before(*row.ExpiresAt)) || row.Input == nil || row.Output == nil {
		out.Reason = ReasonRetentionExpired
		if row.PurgedAt == nil && row.ExpiresAt == nil {
			out.Reason = ReasonNotCaptured
		}
		return out, nil
	}
	out.Captured = true
	out.Input, out.Output = json.RawMessage(*row.Input), json.RawMessage(*row.Output)
	return out, nil
}

// PurgeExpired drops payloads past their retention; the Purger calls it periodically.
func (s *Service) PurgeExpired(ctx context.Context) (int64, error) {
	return s.rec.store.purgeExpired(ctx, s.now())
}

// Package observability records what runs did: a persisted span tree per run (timing, status,
// attribution, never payloads), a live trace stream, per-node I/O captured under the agent's
// policy, OpenTelemetry export and the run and node metrics.
package observability

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"time"
)

// Span kinds.
const (
	KindRun       = "run"        // the whole run; root of the tree
	KindNode      = "node"       // one node execution
	KindIteration = "iteration"  // a loop iteration or a map element; body nodes nest under it
	KindModelCall = "model_call" // the model call an llm node made
	KindToolCall  = "tool_call"  // the HTTP or MCP call a tool node made
)

// Span statuses.
const (
	StatusRunning = "running" // opened, not closed yet
	StatusOK      = "ok"
	StatusError   = "error"
	StatusSkipped = "skipped" // dead path: the node never ran
	StatusWaiting = "waiting" // a human node (or the run) parked until resumed
)

// Attributes say what a span used. Zero values are omitted.
type Attributes struct {
	Model       string `json:"model,omitempty"`
	TokensIn    int    `json:"tokens_in,omitempty"`
	TokensOut   int    `json:"tokens_out,omitempty"`
	ToolType    string `json:"tool_type,omitempty"`
	ToolHost    string `json:"tool_host,omitempty"`
	ToolName    string `json:"tool_name,omitempty"`
	MCPServer   string `json:"mcp_server,omitempty"`
	Connection  string `json:"connection,omitempty"`
	Agent       string `json:"agent,omitempty"`
	Version     string `json:"version,omitempty"`
	ContentHash string `json:"content_hash,omitempty"`
	Iterations  int    `json:"iterations,omitempty"`
	SessionID   string `json:"session_id,omitempty"`
	TriggerID   string `json:"trigger_id,omitempty"`
	RunKind     string `json:"run_kind,omitempty"`
	Restored    bool   `json:"restored,omitempty"`
}

// SpanError is the code and message of a failed span.
type SpanError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Span is one timed unit of a run. End and DurationMS are absent while it runs.
type Span struct {
	RunID      string     `json:"run_id"`
	SpanID     string     `json:"span_id"`
	ParentID   string     `json:"parent_id,omitempty"`
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	NodeID     string     `json:"node_id,omitempty"`
	NodeKind   string     `json:"node_kind,omitempty"`
	Start      time.Time  `json:"start"`
	End        *time.Time `json:"end,omitempty"`
	DurationMS *int64     `json:"duration_ms,omitempty"`
	Status     string     `json:"status"`
	Attributes Attributes `json:"attributes"`
	Error      *SpanError `json:"error,omitempty"`
}

// Closed reports whether the span has ended.
func (s *Span) Closed() bool { return s.Status != StatusRunning }

// close sets the end, the duration and the status.
func (s *Span) close(end time.Time, status string) {
	if end.Before(s.Start) {
		end = s.Start
	}
	e := end
	d := end.Sub(s.Start).Milliseconds()
	s.End, s.DurationMS, s.Status = &e, &d, status
}

// TraceID is the OpenTelemetry-shaped trace id (32 hex digits) of a run. It is derived from
// the run id, so every replica and every resume of a durable run agrees on it.
func TraceID(runID string) string {
	h := sha256.Sum256([]byte("trace\x00" + runID))
	return hex.EncodeToString(h[:16])
}

// SpanID is the span id (16 hex digits) of the span keyed key within a run: "" is the run span,
// a namespaced node id ("loop/2/inner") a node or iteration span, and node id + "#call" the
// model or tool call of that node. Deterministic ids let a parent be named before it is seen
// and make a re-executed node overwrite its earlier span instead of duplicating it.
func SpanID(runID, key string) string {
	h := sha256.Sum256([]byte("span\x00" + runID + "\x00" + key))
	return hex.EncodeToString(h[:8])
}

// callKey is the span key of a node's model or tool call.
func callKey(nodeID string) string { return nodeID + "#call" }

// Tree is a span with its children, ordered by start time.
type Tree struct {
	Span
	Children []*Tree `json:"children"`
}

// Trace is the response of GET /runs/{id}/trace.
type Trace struct {
	RunID   string `json:"run_id"`
	TraceID string `json:"trace_id"`
	// Status is the run span's status ("running" while the run is in flight, "" when no span
	// has been recorded yet).
	Status    string `json:"status"`
	SpanCount int    `json:"span_count"`
	// Root is the run span with everything under it; null when nothing was recorded.
	Root *Tree `json:"root"`
}

// BuildTree arranges spans into the run's tree. A span whose parent is missing (possible for a
// trace read while the run is being written) hangs under the root so nothing is lost; when there
// is no run span at all, a synthetic running root holds the orphans.
func BuildTree(runID string, spans []Span) Trace {
	t := Trace{RunID: runID, TraceID: TraceID(runID), SpanCount: len(spans)}
	if len(spans) == 0 {
		return t
	}
	nodes := make(map[string]*Tree, len(spans))
	for i := range spans {
		nodes[spans[i].SpanID] = &Tree{Span: spans[i], Children: []*Tree{}}
	}
	rootID := SpanID(runID, "")
	root := nodes[rootID]
	if root == nil {
		// The run span is written when the run starts; without it, show a placeholder.
		root = &Tree{Span: Span{RunID: runID, SpanID: rootID, Name: "run", Kind: KindRun, Status: StatusRunning, Start: spans[0].Start}, Children: []*Tree{}}
		for _, s := range spans {
			if s.Start.Before(root.Start) {
				root.Start = s.Start
			}
		}
	}
	for _, n := range nodes {
		if n == root {
			continue
		}
		p := nodes[n.ParentID]
		if p == nil || p == n {
			p = root
		}
		p.Children = append(p.Children, n)
	}
	for _, n := range nodes {
		sortChildren(n.Children)
	}
	sortChildren(root.Children)
	t.Root, t.Status = root, root.Status
	return t
}

func sortChildren(c []*Tree) {
	sort.Slice(c, func(i, j int) bool {
		if !c[i].Start.Equal(c[j].Start) {
			return c[i].Start.Before(c[j].Start)
		}
		return c[i].SpanID < c[j].SpanID
	})
}

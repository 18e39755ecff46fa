package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/client"
)

// recorder is an EventSink that keeps every event in arrival order.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Emit(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// of returns the events of one type, optionally for one node.
func (r *recorder) of(t EventType, node string) []Event {
	var out []Event
	for _, e := range r.all() {
		if e.Type == t && (node == "" || e.NodeID == node) {
			out = append(out, e)
		}
	}
	return out
}

// statusOf returns node → last lifecycle event type.
func (r *recorder) statusOf() map[string]EventType {
	m := map[string]EventType{}
	for _, e := range r.all() {
		switch e.Type {
		case EventNodeFinished, EventNodeFailed, EventNodeSkipped:
			m[e.NodeID] = e.Type
		}
	}
	return m
}

func mustGraph(t testing.TB, src string) *graph.Graph {
	t.Helper()
	g, err := graph.Decode(json.RawMessage(src))
	if err != nil {
		t.Fatalf("decode graph: %v", err)
	}
	return g
}

func mustJSON(t testing.TB, src string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(src), &v); err != nil {
		t.Fatalf("decode json: %v", err)
	}
	return v
}

func asJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(raw)
}

func runG(t testing.TB, e *Executor, g *graph.Graph, input any, sink EventSink, store NodeResultStore) Result {
	t.Helper()
	return e.Run(context.Background(), Spec{RunID: "run_test", Graph: g, Input: input, Sink: sink, Store: store})
}

// wantCode asserts a failed result with the given code and that details name the node.
func wantCode(t testing.TB, res Result, code, node string) *apperr.Error {
	t.Helper()
	if res.Status != StatusFailed {
		t.Fatalf("status %s (output %s, note %q), want failed with %s", res.Status, asJSON(res.Output), res.Note, code)
	}
	var ae *apperr.Error
	if !errors.As(res.Err, &ae) || ae.Code != code {
		t.Fatalf("error %v, want code %s", res.Err, code)
	}
	if node != "" {
		d, _ := ae.Details.(map[string]any)
		if d["node"] != node {
			t.Fatalf("details %v, want node %q", ae.Details, node)
		}
	}
	return ae
}

func wantOutput(t testing.TB, res Result, want string) {
	t.Helper()
	if res.Status != StatusCompleted {
		t.Fatalf("status %s, err %v, note %q; want completed", res.Status, res.Err, res.Note)
	}
	if got := asJSON(res.Output); got != want {
		t.Fatalf("output %s, want %s", got, want)
	}
}

const greeterIR = `{
  "id": "greeter",
  "nodes": [
    {"id": "shape", "kind": "transform", "expr": "{greeting: \"Hello, \" + $in.in.name}"},
    {"id": "out", "kind": "output", "value": "$in.in.greeting"}
  ],
  "edges": [{"source": "shape", "target": "out"}]
}`

const triageIR = `{
  "id": "triage",
  "nodes": [
    {"id": "route", "kind": "router", "select": "$in.in.kind", "handles": ["bug", "question"]},
    {"id": "eng", "kind": "transform", "expr": "{queue: \"eng\", title: $in.in.title}"},
    {"id": "support", "kind": "transform", "expr": "{queue: \"support\", title: $in.in.title}"},
    {"id": "out", "kind": "output"}
  ],
  "edges": [
    {"source": "route", "sourcePort": "bug", "target": "eng"},
    {"source": "route", "sourcePort": "question", "target": "support"},
    {"source": "eng", "target": "out"},
    {"source": "support", "target": "out"}
  ]
}`

// modelFunc is a scripted ModelClient: it gets the last message's content.
type modelFunc func(ctx context.Context, prompt string, emit func(string)) (string, error)

func (f modelFunc) ChatStream(ctx context.Context, req client.ChatRequest, onDelta func(client.Delta)) (*client.ChatResult, error) {
	prompt := ""
	if len(req.Messages) > 0 {
		prompt = req.Messages[len(req.Messages)-1].Content
	}
	text, err := f(ctx, prompt, func(s string) { onDelta(client.Delta{Content: s}) })
	if err != nil {
		return nil, err
	}
	return &client.ChatResult{Text: text, FinishReason: "stop"}, nil
}

package observability

import (
	"context"
	"encoding/json"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/client"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/events"
	"github.com/svc-dev/svc/platform/testkit"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// policies is a PolicySource over a map; the redactor mimics the agents module's rule form
// (pattern rules replace matches with [REDACTED]; path rules replace a value by dot path).
type policies struct {
	mu sync.Mutex
	m  map[string]Policy
}

func (p *policies) IOPolicy(_ context.Context, agentID string) (Policy, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pol, ok := p.m[agentID]; ok {
		return pol, nil
	}
	return DefaultPolicy(), nil
}

func (p *policies) set(agentID string, pol Policy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]Policy{}
	}
	p.m[agentID] = pol
}

// redactor replaces matches of pattern in every string and the value at each dot path.
func redactor(pattern string, paths ...[]string) func(any) any {
	re := regexp.MustCompile(pattern)
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return re.ReplaceAllLiteralString(x, "[REDACTED]")
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return func(v any) any {
		v = walk(v)
		for _, path := range paths {
			cur := v
			for i, seg := range path {
				m, ok := cur.(map[string]any)
				if !ok {
					break
				}
				if i == len(path)-1 {
					if _, ok := m[seg]; ok {
						m[seg] = "[REDACTED]"
					}
					break
				}
				cur = m[seg]
			}
		}
		return v
	}
}

// runLookup is a RunLookup over a map of run id → status.
type runLookup map[string]string

func (l runLookup) RunStatus(_ context.Context, id string) (string, bool, error) {
	s, ok := l[id]
	return s, ok, nil
}

// fakeModel answers every chat with a fixed text and token counts.
type fakeModel struct{}

func (fakeModel) ChatStream(_ context.Context, req client.ChatRequest, onDelta func(client.Delta)) (*client.ChatResult, error) {
	onDelta(client.Delta{Content: "fine"})
	return &client.ChatResult{Text: "fine", FinishReason: "stop", Usage: client.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17}}, nil
}

// env is a recorder, its read side and the HTTP module behind the real stack.
type env struct {
	db   *database.DB
	bus  *events.Bus
	rec  *Recorder
	svc  *Service
	mod  *Module
	srv  *testkit.Server
	pols *policies
	clk  *clock
}

type envOptions struct {
	recorder  RecorderOptions
	runs      RunLookup
	keepalive time.Duration
	purge     time.Duration
	bus       *events.Bus // nil: a fresh local bus
}

func newEnv(t *testing.T, db *database.DB, o envOptions) *env {
	t.Helper()
	bus := o.bus
	if bus == nil {
		bus = events.NewBus(events.Options{})
		t.Cleanup(bus.Close)
	}
	e := &env{db: db, bus: bus, pols: &policies{}, clk: &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}}
	ro := o.recorder
	ro.DB, ro.Bus = db, bus
	if ro.Policies == nil {
		ro.Policies = e.pols
	}
	if ro.Now == nil {
		ro.Now = e.clk.Now
	}
	e.rec = NewRecorder(ro)
	e.svc = NewService(e.rec, o.runs)
	e.mod = NewModule(ModuleOptions{Service: e.svc, Keepalive: o.keepalive, PurgeInterval: o.purge})
	e.srv = testkit.New(t, testkit.Options{}, e.mod)
	return e
}

func mustGraph(t testing.TB, src string) *graph.Graph {
	t.Helper()
	g, err := graph.Decode(json.RawMessage(src))
	if err != nil {
		t.Fatalf("decode graph: %v", err)
	}
	return g
}

// run executes a graph through the real executor with the recorder as observer; the run
// must not fail.
func (e *env) run(t testing.TB, info RunInfo, ir string, input any) runtime.Result {
	t.Helper()
	ex := runtime.New(runtime.Deps{Models: fakeModel{}, Now: e.clk.Now})
	ctx := context.Background()
	info.StartedAt = e.clk.Now()
	sink := e.rec.RunStarted(ctx, info)
	res := ex.Run(ctx, runtime.Spec{RunID: info.RunID, Graph: mustGraph(t, ir), Input: input, Sink: sink})
	out := RunOutcome{Status: res.Status, Note: res.Note, Output: res.Output, CompletedAt: e.clk.Now()}
	if res.Err != nil {
		out.ErrorMessage = res.Err.Error()
	}
	e.rec.RunFinished(ctx, info, out)
	if res.Status == runtime.StatusFailed {
		t.Fatalf("run %s failed: %v", info.RunID, res.Err)
	}
	return res
}

func decode(t testing.TB, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}

// find returns the first span in the tree matching pred.
func find(n *Tree, pred func(*Tree) bool) *Tree {
	if n == nil {
		return nil
	}
	if pred(n) {
		return n
	}
	for _, c := range n.Children {
		if f := find(c, pred); f != nil {
			return f
		}
	}
	return nil
}

func byNode(id string) func(*Tree) bool {
	return func(n *Tree) bool { return n.NodeID == id && (n.Kind == KindNode || n.Kind == KindIteration) }
}

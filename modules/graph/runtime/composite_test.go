package runtime

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/apperr"
)

func TestLoopUntil(t *testing.T) {
	g := mustGraph(t, `{"nodes":[
	  {"id":"count","kind":"loop","maxIterations":10,"until":"$in.in.n >= 3","body":{"nodes":[
	    {"id":"inc","kind":"transform","expr":"{n: $in.in.n + 1}"},
	    {"id":"o","kind":"output"}],"edges":[{"source":"inc","target":"o"}]}},
	  {"id":"out","kind":"output"}],"edges":[{"source":"count","target":"out"}]}`)
	rec := &recorder{}
	res := runG(t, New(Deps{}), g, mustJSON(t, `{"n":0}`), rec, nil)
	wantOutput(t, res, `{"n":3}`)
	if res.Note != "" {
		t.Fatalf("note %q", res.Note)
	}
	// Iterations and body nodes are namespaced and nested.
	its := rec.of(EventNodeFinished, "count/2")
	if len(its) != 1 || its[0].Kind != KindIteration || its[0].Parent != "count" {
		t.Fatalf("iteration events %+v", its)
	}
	inner := rec.of(EventNodeFinished, "count/2/inc")
	if len(inner) != 1 || inner[0].Parent != "count/2" {
		t.Fatalf("inner events %+v", inner)
	}
	if len(rec.of(EventNodeFinished, "count/3")) != 0 {
		t.Fatal("ran past until")
	}
	if fin := rec.of(EventNodeFinished, "count"); len(fin) != 1 || fin[0].Attr.Iterations != 3 {
		t.Fatalf("loop event %+v", fin)
	}
}

func TestLoopMaxIterationsNotes(t *testing.T) {
	g := mustGraph(t, `{"nodes":[
	  {"id":"l","kind":"loop","maxIterations":4,"until":"false","body":{"nodes":[
	    {"id":"inc","kind":"transform","expr":"$in.in + 1"},{"id":"o","kind":"output"}],"edges":[{"source":"inc","target":"o"}]}},
	  {"id":"out","kind":"output"}],"edges":[{"source":"l","target":"out"}]}`)
	res := runG(t, New(Deps{}), g, 0, nil, nil)
	wantOutput(t, res, `4`)
	if !strings.Contains(res.Note, "maxIterations (4)") {
		t.Fatalf("note %q", res.Note)
	}
}

func TestLoopErrors(t *testing.T) {
	body := `{"nodes":[{"id":"o","kind":"output"}],"edges":[]}`
	cases := map[string]struct{ node, code string }{
		`{"id":"l","kind":"loop","maxIterations":0,"body":` + body + `}`:                                                              {"l", "invalid_ir"},
		`{"id":"l","kind":"loop","maxIterations":2,"until":"1","body":` + body + `}`:                                                  {"l", "transform_error"},
		`{"id":"l","kind":"loop","maxIterations":2,"until":"$in.in.x.y","body":` + body + `}`:                                         {"l", "transform_error"},
		`{"id":"l","kind":"loop","maxIterations":2,"body":{"nodes":[{"id":"t","kind":"transform","expr":"$in.in.nope"}],"edges":[]}}`: {"l/0/t", "transform_error"},
	}
	for node, want := range cases {
		g := mustGraph(t, `{"nodes":[`+node+`],"edges":[]}`)
		wantCode(t, runG(t, New(Deps{}), g, mustJSON(t, `{}`), nil, nil), want.code, want.node)
	}
}

func TestMapInOrderWithBoundedConcurrency(t *testing.T) {
	var inflight, peak atomic.Int32
	release := make(chan struct{})
	var once sync.Once
	models := modelFunc(func(ctx context.Context, prompt string, emit func(string)) (string, error) {
		n := inflight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n == 2 {
			once.Do(func() { close(release) })
		}
		<-release
		inflight.Add(-1)
		return strings.ToUpper(prompt), nil
	})
	g := mustGraph(t, `{"nodes":[
	  {"id":"each","kind":"map","over":"$in.in.words","concurrency":2,"body":{"nodes":[
	    {"id":"up","kind":"llm","model":"m","prompt":"$in.in"},{"id":"o","kind":"output","value":"$in.in.text"}],"edges":[{"source":"up","target":"o"}]}},
	  {"id":"out","kind":"output"}],"edges":[{"source":"each","target":"out"}]}`)
	rec := &recorder{}
	res := runG(t, New(Deps{Models: models}), g, mustJSON(t, `{"words":["a","b","c","d","e"]}`), rec, nil)
	wantOutput(t, res, `["A","B","C","D","E"]`)
	if peak.Load() > 2 {
		t.Fatalf("concurrency %d exceeds 2", peak.Load())
	}
	if ev := rec.of(EventNodeFinished, "each[3]/up"); len(ev) != 1 || ev[0].Parent != "each[3]" {
		t.Fatalf("element events %+v", ev)
	}
}

func TestMapErrors(t *testing.T) {
	body := `{"nodes":[{"id":"t","kind":"transform","expr":"10 / $in.in"},{"id":"o","kind":"output"}],"edges":[{"source":"t","target":"o"}]}`
	g := mustGraph(t, `{"nodes":[{"id":"m","kind":"map","over":"$in.in.xs","body":`+body+`}],"edges":[]}`)
	wantCode(t, runG(t, New(Deps{}), g, mustJSON(t, `{"xs":"nope"}`), nil, nil), "template_error", "m")
	wantCode(t, runG(t, New(Deps{}), g, mustJSON(t, `{}`), nil, nil), "template_error", "m")
	ae := wantCode(t, runG(t, New(Deps{}), g, mustJSON(t, `{"xs":[1,"x",3]}`), nil, nil), "transform_error", "m[1]/t")
	_ = ae
	res := runG(t, New(Deps{}), g, mustJSON(t, `{"xs":[]}`), nil, nil)
	if res.Status != StatusCompleted {
		t.Fatalf("empty map: %+v", res)
	}
}

type agents map[string]*graph.Graph

func (a agents) Load(ctx context.Context, agent, version, hash string) (*graph.Graph, string, error) {
	key := agent
	if hash != "" {
		key = agent + "@" + hash
	} else if version != "" {
		key = agent + "@" + version
	}
	g, found := a[key]
	if !found {
		return nil, "", apperr.NotFound("agent_not_found", "no such agent")
	}
	return g, "sha256:" + key, nil
}

func TestSubgraph(t *testing.T) {
	ag := agents{"greeter": mustGraph(t, greeterIR), "greeter@2": mustGraph(t, triageIR)}
	ag["self"] = mustGraph(t, `{"nodes":[{"id":"again","kind":"subgraph","agent":"self"}],"edges":[]}`)
	e := New(Deps{Agents: ag})
	g := mustGraph(t, `{"nodes":[{"id":"sub","kind":"subgraph","agent":"greeter"},{"id":"o","kind":"output","value":"<$in.in>"}],"edges":[{"source":"sub","target":"o"}]}`)
	rec := &recorder{}
	wantOutput(t, runG(t, e, g, mustJSON(t, `{"name":"Ada"}`), rec, nil), `"\u003cHello, Ada\u003e"`)
	if ev := rec.of(EventNodeFinished, "sub/shape"); len(ev) != 1 || ev[0].Parent != "sub" {
		t.Fatalf("child events %+v", rec.all())
	}
	if ev := rec.of(EventNodeFinished, "sub"); len(ev) != 1 || ev[0].Attr.ContentHash != "sha256:greeter" || ev[0].Attr.Agent != "greeter" {
		t.Fatalf("subgraph event %+v", ev)
	}
	// Child failures keep their code and name the namespaced node.
	wantCode(t, runG(t, e, g, mustJSON(t, `{}`), nil, nil), "transform_error", "sub/shape")
	// Pinned version.
	pinned := mustGraph(t, `{"nodes":[{"id":"sub","kind":"subgraph","agent":"greeter","version":"2"},{"id":"o","kind":"output"}],"edges":[{"source":"sub","target":"o"}]}`)
	wantOutput(t, runG(t, e, pinned, mustJSON(t, `{"kind":"bug","title":"t"}`), nil, nil), `{"queue":"eng","title":"t"}`)
	// Unknown agent, and an agent that includes itself.
	missing := mustGraph(t, `{"nodes":[{"id":"sub","kind":"subgraph","agent":"ghost"}],"edges":[]}`)
	wantCode(t, runG(t, e, missing, nil, nil, nil), "subgraph_error", "sub")
	wantCode(t, runG(t, e, ag["self"], nil, nil, nil), "subgraph_error", "")
	wantCode(t, runG(t, New(Deps{}), missing, nil, nil, nil), "subgraph_error", "sub")
}

// humanIR asks a human between two transforms.
const humanIR = `{"nodes":[
  {"id":"prep","kind":"transform","expr":"{draft: \"reply to \" + $in.in.who}"},
  {"id":"ask","kind":"human","prompt":"Approve: $in.in.draft"},
  {"id":"side","kind":"llm","model":"m","prompt":"side"},
  {"id":"done","kind":"transform","expr":"{approved: $in.in.ok, side: $in.s.text}"},
  {"id":"out","kind":"output"}],
 "edges":[{"source":"prep","target":"ask"},{"source":"ask","target":"done"},{"source":"side","target":"done","targetPort":"s"},{"source":"done","target":"out"}]}`

func TestHumanParkAndResume(t *testing.T) {
	var modelCalls atomic.Int32
	models := modelFunc(func(ctx context.Context, prompt string, emit func(string)) (string, error) {
		modelCalls.Add(1)
		return "side done", nil
	})
	e := New(Deps{Models: models})
	g := mustGraph(t, humanIR)
	store := NewMemoryStore()
	res := runG(t, e, g, mustJSON(t, `{"who":"Ada"}`), nil, store)
	if res.Status != StatusWaiting || res.AwaitingNode != "ask" || res.Prompt != "Approve: reply to Ada" {
		t.Fatalf("%+v", res)
	}
	// The independent branch finished and was checkpointed while the human branch waited.
	if store.Saves("side") != 1 || store.Saves("prep") != 1 || store.Saves("ask") != 0 {
		t.Fatalf("saves side=%d prep=%d ask=%d", store.Saves("side"), store.Saves("prep"), store.Saves("ask"))
	}
	// Running again without an answer waits again and re-executes nothing.
	if res := runG(t, e, g, mustJSON(t, `{"who":"Ada"}`), nil, store); res.Status != StatusWaiting {
		t.Fatalf("%+v", res)
	}
	// Resume: the answer becomes the human node's output.
	if err := store.Save(context.Background(), res.AwaitingNode, HumanResult(mustJSON(t, `{"ok":true}`))); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	res = runG(t, e, g, mustJSON(t, `{"who":"Ada"}`), rec, store)
	wantOutput(t, res, `{"approved":true,"side":"side done"}`)
	if modelCalls.Load() != 1 || store.Saves("prep") != 1 {
		t.Fatalf("re-executed checkpointed nodes: model calls %d, prep saves %d", modelCalls.Load(), store.Saves("prep"))
	}
	if ev := rec.of(EventNodeFinished, "prep"); len(ev) != 1 || !ev[0].Restored {
		t.Fatalf("prep not restored: %+v", ev)
	}
}

func TestHumanInsideMapParksAndResumesElementwise(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"echo":%q}`, r.URL.Query().Get("v"))
	}))
	defer srv.Close()
	// Elements call a tool; element 1 additionally needs a human answer.
	g := mustGraph(t, fmt.Sprintf(`{"nodes":[
	  {"id":"m","kind":"map","over":"$in.in","concurrency":3,"body":{"nodes":[
	    {"id":"call","kind":"tool","tool":{"type":"http","url":"%s/?v=$in.in.v"}},
	    {"id":"gate","kind":"router","select":"$in.in.ask","handles":["yes","no"]},
	    {"id":"h","kind":"human","prompt":"check $in.in.v"},
	    {"id":"o1","kind":"output","value":"$in.in.body.echo"},
	    {"id":"o2","kind":"output","value":"$in.in"}],
	   "edges":[{"source":"gate","sourcePort":"no","target":"call"},{"source":"call","target":"o1"},
	            {"source":"gate","sourcePort":"yes","target":"h"},{"source":"h","target":"o2"}]}},
	  {"id":"out","kind":"output"}],"edges":[{"source":"m","target":"out"}]}`, srv.URL))
	input := mustJSON(t, `[{"v":"a","ask":"no"},{"v":"b","ask":"yes"},{"v":"c","ask":"no"}]`)
	store := NewMemoryStore()
	e := New(Deps{})
	res := runG(t, e, g, input, nil, store)
	if res.Status != StatusWaiting || res.AwaitingNode != "m[1]/h" || res.Prompt != "check b" {
		t.Fatalf("%+v", res)
	}
	if calls.Load() != 2 || store.Saves("m[0]") != 1 || store.Saves("m[2]") != 1 {
		t.Fatalf("calls %d, element saves %d %d", calls.Load(), store.Saves("m[0]"), store.Saves("m[2]"))
	}
	_ = store.Save(context.Background(), res.AwaitingNode, HumanResult("B!"))
	res = runG(t, e, g, input, nil, store)
	wantOutput(t, res, `["a","B!","c"]`)
	if calls.Load() != 2 {
		t.Fatalf("finished elements re-ran: %d calls", calls.Load())
	}
}

func TestResumeRestoresToolErrAndNotes(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(500)
	}))
	defer srv.Close()
	g := mustGraph(t, fmt.Sprintf(`{"nodes":[
	  {"id":"call","kind":"tool","tool":{"type":"http","url":"%s"}},
	  {"id":"h","kind":"human"},
	  {"id":"o","kind":"output","value":"$in.in"}],
	 "edges":[{"source":"h","target":"o"}]}`, srv.URL))
	store := NewMemoryStore()
	e := New(Deps{})
	if res := runG(t, e, g, nil, nil, store); res.Status != StatusWaiting {
		t.Fatalf("%+v", res)
	}
	_ = store.Save(context.Background(), "h", HumanResult("yes"))
	res := runG(t, e, g, nil, nil, store)
	wantOutput(t, res, `"yes"`)
	if calls.Load() != 1 || !strings.Contains(res.Note, "http_status") {
		t.Fatalf("calls %d note %q", calls.Load(), res.Note)
	}
}

func TestSubgraphPinSurvivesResume(t *testing.T) {
	ag := agents{"flow": mustGraph(t, `{"nodes":[{"id":"h","kind":"human"},{"id":"o","kind":"output","value":"v1 $in.in"}],"edges":[{"source":"h","target":"o"}]}`)}
	e := New(Deps{Agents: ag})
	g := mustGraph(t, `{"nodes":[{"id":"s","kind":"subgraph","agent":"flow"},{"id":"o","kind":"output"}],"edges":[{"source":"s","target":"o"}]}`)
	store := NewMemoryStore()
	res := runG(t, e, g, nil, nil, store)
	if res.Status != StatusWaiting || res.AwaitingNode != "s/h" {
		t.Fatalf("%+v", res)
	}
	// The agent moves on to a new latest version while the run waits.
	ag["flow"] = mustGraph(t, `{"nodes":[{"id":"o","kind":"output","value":"v2"}],"edges":[]}`)
	ag["flow@sha256:flow"] = mustGraph(t, `{"nodes":[{"id":"h","kind":"human"},{"id":"o","kind":"output","value":"v1 $in.in"}],"edges":[{"source":"h","target":"o"}]}`)
	_ = store.Save(context.Background(), "s/h", HumanResult("ok"))
	wantOutput(t, runG(t, e, g, nil, nil, store), `"v1 ok"`)
}

package observability

import (
	"context"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
)

// branchingIR routes on kind: the bug branch calls a model, then loops twice; the question
// branch is dead for kind=bug, so "support" is skipped.
const branchingIR = `{"nodes":[
  {"id":"route","kind":"router","select":"$in.in.kind","handles":["bug","question"]},
  {"id":"draft","kind":"llm","model":"fake-model","prompt":"Summarise: $in.in.title"},
  {"id":"prep","kind":"transform","expr":"{n: 0}"},
  {"id":"count","kind":"loop","maxIterations":5,"until":"$in.in.n >= 2","body":{"nodes":[
    {"id":"inc","kind":"transform","expr":"{n: $in.in.n + 1}"},
    {"id":"o","kind":"output"}],"edges":[{"source":"inc","target":"o"}]}},
  {"id":"support","kind":"transform","expr":"{queue: \"support\"}"},
  {"id":"out","kind":"output"}],
 "edges":[
  {"source":"route","sourcePort":"bug","target":"draft"},
  {"source":"draft","target":"prep"},
  {"source":"prep","target":"count"},
  {"source":"count","target":"out"},
  {"source":"route","sourcePort":"question","target":"support"},
  {"source":"support","target":"out"}]}`

func TestTraceTreeOfBranchingGraph(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db, envOptions{})
		res := e.run(t, RunInfo{RunID: "run_tree", AgentID: "triage", Version: "1", ContentHash: "sha256:abc"},
			branchingIR, map[string]any{"kind": "bug", "title": "crash-title-payload"})
		if res.Status != runtime.StatusCompleted {
			t.Fatalf("run: %+v", res)
		}

		r := e.srv.Do("GET", "/runs/run_tree/trace", nil)
		if r.Status != 200 {
			t.Fatalf("trace: %d %s", r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), "crash-title-payload") || strings.Contains(string(r.Body), "fine") {
			t.Fatalf("trace carries payloads: %s", r.Body)
		}
		var tr Trace
		decode(t, r.Body, &tr)
		if tr.Root == nil || tr.Root.Kind != KindRun || tr.Status != StatusOK || tr.TraceID != TraceID("run_tree") {
			t.Fatalf("root: %+v", tr)
		}
		if tr.Root.Attributes.Agent != "triage" || tr.Root.Attributes.ContentHash != "sha256:abc" || tr.Root.End == nil {
			t.Fatalf("run span: %+v", tr.Root.Span)
		}
		want := map[string]string{"route": StatusOK, "draft": StatusOK, "prep": StatusOK, "count": StatusOK, "support": StatusSkipped, "out": StatusOK}
		for id, status := range want {
			n := find(tr.Root, byNode(id))
			if n == nil {
				t.Fatalf("no span for %s", id)
			}
			if n.Status != status || n.ParentID != tr.Root.SpanID || n.DurationMS == nil || n.End == nil {
				t.Fatalf("%s: %+v", id, n.Span)
			}
		}
		// The model call hangs under the llm node with the model and the tokens.
		draft := find(tr.Root, byNode("draft"))
		if len(draft.Children) != 1 {
			t.Fatalf("draft children: %+v", draft.Children)
		}
		call := draft.Children[0]
		if call.Kind != KindModelCall || call.Name != "chat fake-model" || call.Attributes.Model != "fake-model" ||
			call.Attributes.TokensIn != 12 || call.Attributes.TokensOut != 5 || call.Status != StatusOK {
			t.Fatalf("model call: %+v", call.Span)
		}
		if draft.Attributes.TokensIn != 12 || draft.NodeKind != "llm" {
			t.Fatalf("draft attribution: %+v", draft.Span)
		}
		// The loop holds its iterations, each holding its body nodes.
		count := find(tr.Root, byNode("count"))
		if count.Attributes.Iterations != 2 || len(count.Children) != 2 {
			t.Fatalf("loop: %+v children %d", count.Span, len(count.Children))
		}
		for _, it := range count.Children {
			if it.Kind != KindIteration || it.Status != StatusOK || len(it.Children) != 2 {
				t.Fatalf("iteration: %+v (%d children)", it.Span, len(it.Children))
			}
			inc := find(it, func(n *Tree) bool { return strings.HasSuffix(n.NodeID, "/inc") })
			if inc == nil || inc.ParentID != it.SpanID || inc.NodeID != it.NodeID+"/inc" {
				t.Fatalf("body node under %s: %+v", it.NodeID, inc)
			}
		}
		// 1 run + 6 nodes + 1 call + 2 iterations × (1 + 2 body nodes).
		if tr.SpanCount != 14 {
			t.Fatalf("span count %d", tr.SpanCount)
		}
	})
}

func TestTraceOfFailedNodeAndToolAttribution(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	e := newEnv(t, db, envOptions{})
	// A tool node whose URL is not absolute fails on its err port: the run completes, the
	// node (and its tool call) show as errors with the tool attribution.
	ir := `{"nodes":[{"id":"fetch","kind":"tool","tool":{"type":"http","method":"GET","url":"not a url","connection":"crm"}},{"id":"out","kind":"output"}],
	  "edges":[{"source":"fetch","target":"out"},{"source":"fetch","sourcePort":"err","target":"out"}]}`
	res := e.run(t, RunInfo{RunID: "run_tool"}, ir, map[string]any{})
	if res.Status != runtime.StatusCompleted {
		t.Fatalf("run %+v", res)
	}
	tr, err := e.svc.Trace(context.Background(), "run_tool")
	if err != nil {
		t.Fatal(err)
	}
	fetch := find(tr.Root, byNode("fetch"))
	if fetch == nil || fetch.Status != StatusError || fetch.Error == nil || fetch.Error.Code == "" || fetch.Attributes.Connection != "crm" || fetch.Attributes.ToolType != "http" {
		t.Fatalf("fetch: %+v", fetch)
	}
	if len(fetch.Children) != 1 || fetch.Children[0].Kind != KindToolCall || fetch.Children[0].Status != StatusError {
		t.Fatalf("tool call: %+v", fetch.Children)
	}
}

func TestTraceNotFoundAndEmpty(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	e := newEnv(t, db, envOptions{runs: runLookup{"run_known": "created"}})
	for _, path := range []string{"/runs/nope/trace", "/runs/nope/trace/stream", "/runs/nope/nodes/a/io"} {
		r := e.srv.Do("GET", path, nil)
		if r.Status != 404 || r.ErrorCode() != "run_not_found" {
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
	}
	// A run the runs table knows, with nothing recorded yet: an empty trace.
	r := e.srv.Do("GET", "/runs/run_known/trace", nil)
	if r.Status != 200 {
		t.Fatalf("known run: %d %s", r.Status, r.Body)
	}
	var tr Trace
	decode(t, r.Body, &tr)
	if tr.Root != nil || tr.SpanCount != 0 {
		t.Fatalf("empty trace: %s", r.Body)
	}
	if r := e.srv.Do("GET", "/runs/run_known/nodes/x/io", nil); r.Status != 404 || r.ErrorCode() != "node_not_found" {
		t.Fatalf("unknown node: %d %s", r.Status, r.Body)
	}
}

// TestRestoredEventsKeepOriginalSpans replays a checkpoint (restored finished events) over a
// trace already written: the original spans stay; the parked human node is completed.
func TestRestoredEventsKeepOriginalSpans(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	e := newEnv(t, db, envOptions{})
	ctx := context.Background()
	info := RunInfo{RunID: "run_dur", Durable: true, StartedAt: e.clk.Now()}
	t0 := e.clk.Now()
	sink := e.rec.RunStarted(ctx, info)
	sink.Emit(runtime.Event{Type: runtime.EventNodeStarted, NodeID: "a", Kind: "transform", Start: t0})
	sink.Emit(runtime.Event{Type: runtime.EventNodeFinished, NodeID: "a", Kind: "transform", Start: t0, End: t0.Add(40e6), Status: runtime.NodeOK})
	sink.Emit(runtime.Event{Type: runtime.EventNodeStarted, NodeID: "h", Kind: "human", Start: t0.Add(40e6)})
	sink.Emit(runtime.Event{Type: runtime.EventNodeFinished, NodeID: "h", Kind: "human", Start: t0.Add(40e6), End: t0.Add(50e6), Status: runtime.StatusWaiting})
	e.rec.RunFinished(ctx, info, RunOutcome{Status: runtime.StatusWaiting, CompletedAt: t0.Add(50e6)})
	if err := e.rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Resume (in a fresh recorder, as another replica would): both nodes come back restored.
	rec2 := NewRecorder(RecorderOptions{DB: db, Now: e.clk.Now})
	t1 := t0.Add(10e9)
	sink = rec2.RunStarted(ctx, info)
	sink.Emit(runtime.Event{Type: runtime.EventNodeFinished, NodeID: "a", Kind: "transform", Start: t1, End: t1, Status: runtime.NodeOK, Restored: true})
	sink.Emit(runtime.Event{Type: runtime.EventNodeFinished, NodeID: "h", Kind: "human", Start: t1, End: t1, Status: runtime.NodeOK, Restored: true})
	rec2.RunFinished(ctx, info, RunOutcome{Status: runtime.StatusCompleted, CompletedAt: t1})
	if err := rec2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tr, err := e.svc.Trace(ctx, "run_dur")
	if err != nil {
		t.Fatal(err)
	}
	a, h := find(tr.Root, byNode("a")), find(tr.Root, byNode("h"))
	if a.Status != StatusOK || *a.DurationMS != 40 || a.Attributes.Restored {
		t.Fatalf("a was overwritten by its replay: %+v", a.Span)
	}
	if h.Status != StatusOK || !h.Attributes.Restored {
		t.Fatalf("h should be completed by the resume: %+v", h.Span)
	}
	if tr.Status != StatusOK || !tr.Root.Start.Equal(t0) {
		t.Fatalf("run span: %+v", tr.Root.Span)
	}
}

func TestBuildTreeOrphans(t *testing.T) {
	spans := []Span{
		{RunID: "r", SpanID: "b", ParentID: "missing", Status: StatusOK},
		{RunID: "r", SpanID: "c", ParentID: "c", Status: StatusOK},
	}
	tr := BuildTree("r", spans)
	if tr.Root == nil || len(tr.Root.Children) != 2 || tr.Root.Status != StatusRunning {
		t.Fatalf("orphans: %+v", tr.Root)
	}
}

// FuzzBuildTree: any parent links (cycles, self-links, unknown parents) give a tree without
// losing the run span or panicking.
func FuzzBuildTree(f *testing.F) {
	f.Add("a", "b", "b", "a", "")
	f.Add("x", "x", "y", "", "y")
	f.Add("", "", "", "", "")
	f.Fuzz(func(t *testing.T, id1, p1, id2, p2, p3 string) {
		root := SpanID("r", "")
		spans := []Span{{SpanID: id1, ParentID: p1}, {SpanID: id2, ParentID: p2}, {SpanID: root, ParentID: p3, Kind: KindRun}}
		tr := BuildTree("r", spans)
		if tr.Root == nil || tr.SpanCount != 3 {
			t.Fatalf("tree %+v", tr)
		}
	})
}

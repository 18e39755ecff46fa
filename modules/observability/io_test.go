package observability

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
)

func int64p(v int64) *int64 { return &v }

// ioOf reads GET /runs/{id}/nodes/{node}/io, which must answer 200.
func (e *env) ioOf(t *testing.T, runID, node string) NodeIO {
	t.Helper()
	r := e.srv.Do("GET", "/runs/"+runID+"/nodes/"+node+"/io", nil)
	if r.Status != 200 {
		t.Fatalf("io %s/%s: %d %s", runID, node, r.Status, r.Body)
	}
	var out NodeIO
	decode(t, r.Body, &out)
	return out
}

const greeterIR = `{"nodes":[
  {"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name, token: $in.in.token}"},
  {"id":"out","kind":"output","value":"$in.in.greeting"}],
 "edges":[{"source":"shape","target":"out"}]}`

func TestNodeIOGatingReasons(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db, envOptions{recorder: RecorderOptions{MaxIOBytes: 200}})
		input := map[string]any{"name": "Ada", "token": "sk-live-123456"}

		e.pols.set("off", Policy{Capture: CaptureOff})
		e.run(t, RunInfo{RunID: "r_off", AgentID: "off"}, greeterIR, input)
		if got := e.ioOf(t, "r_off", "shape"); got.Reason != ReasonCaptureOff || got.Captured || got.Input != nil {
			t.Fatalf("capture off: %+v", got)
		}

		// No policy set: the default keeps metadata only.
		e.run(t, RunInfo{RunID: "r_meta", AgentID: "meta"}, greeterIR, input)
		got := e.ioOf(t, "r_meta", "shape")
		if got.Reason != ReasonMetadataOnly || got.Input != nil || got.InputMeta["in"].Type != "object" || got.InputMeta["in"].Bytes == 0 || got.OutputMeta["out"].Type != "object" {
			t.Fatalf("metadata: %+v", got)
		}

		e.pols.set("full", Policy{Capture: CaptureFull})
		e.run(t, RunInfo{RunID: "r_full", AgentID: "full"}, greeterIR, input)
		got = e.ioOf(t, "r_full", "shape")
		if !got.Captured || got.Reason != "" || !strings.Contains(string(got.Input), `"name":"Ada"`) || !strings.Contains(string(got.Output), "Hello, Ada") {
			t.Fatalf("full: %+v", got)
		}
		if out := e.ioOf(t, "r_full", "out"); !strings.Contains(string(out.Output), `"value":"Hello, Ada"`) {
			t.Fatalf("output node: %s", out.Output)
		}

		// A payload over MaxIOBytes keeps its metadata only.
		e.run(t, RunInfo{RunID: "r_big", AgentID: "full"}, greeterIR, map[string]any{"name": strings.Repeat("x", 300), "token": "t"})
		if got := e.ioOf(t, "r_big", "shape"); got.Reason != ReasonTooLarge || got.Input != nil || got.InputMeta["in"].Bytes < 300 {
			t.Fatalf("too large: %+v", got)
		}

		// Skipped node of a dead branch.
		e.run(t, RunInfo{RunID: "r_branch", AgentID: "full"}, branchingIR, map[string]any{"kind": "bug", "title": "t"})
		if got := e.ioOf(t, "r_branch", "support"); got.Reason != ReasonNodeSkipped {
			t.Fatalf("skipped: %+v", got)
		}
		// Nested node ids travel percent-encoded.
		var iter string
		tr, err := e.svc.Trace(context.Background(), "r_branch")
		if err != nil {
			t.Fatal(err)
		}
		if it := find(tr.Root, func(n *Tree) bool { return n.Kind == KindIteration }); it != nil {
			iter = it.NodeID
		}
		if got := e.ioOf(t, "r_branch", strings.ReplaceAll(iter+"/inc", "/", "%2F")); !got.Captured || got.NodeID != iter+"/inc" {
			t.Fatalf("nested node %s: %+v", iter, got)
		}

		// A node still running, and a node that finished without payloads.
		ctx := context.Background()
		info := RunInfo{RunID: "r_live", AgentID: "full"}
		sink := e.rec.RunStarted(ctx, info)
		now := e.clk.Now()
		sink.Emit(runtime.Event{Type: runtime.EventNodeStarted, NodeID: "slow", Kind: "tool", Start: now})
		sink.Emit(runtime.Event{Type: runtime.EventNodeStarted, NodeID: "bare", Kind: "transform", Start: now})
		sink.Emit(runtime.Event{Type: runtime.EventNodeFinished, NodeID: "bare", Kind: "transform", Start: now, End: now, Status: runtime.NodeOK})
		if got := e.ioOf(t, "r_live", "slow"); got.Reason != ReasonNodeRunning {
			t.Fatalf("running: %+v", got)
		}
		if got := e.ioOf(t, "r_live", "bare"); got.Reason != ReasonNotCaptured {
			t.Fatalf("not captured: %+v", got)
		}
		e.rec.RunFinished(ctx, info, RunOutcome{Status: runtime.StatusCompleted})

		// Unknown node of a known run, unknown run, and a call span id are 404s.
		for path, code := range map[string]string{"/runs/r_full/nodes/ghost/io": "node_not_found", "/runs/ghost/nodes/shape/io": "run_not_found",
			"/runs/r_branch/nodes/draft%23call/io": "node_not_found"} {
			if r := e.srv.Do("GET", path, nil); r.Status != 404 || r.ErrorCode() != code {
				t.Fatalf("%s: %d %s", path, r.Status, r.Body)
			}
		}
	})
}

func TestRedactedSecretNeverStored(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db, envOptions{})
		e.pols.set("greeter", Policy{Capture: CaptureFull, Redact: redactor(`sk-live-[0-9]+`, []string{"in", "password"})})
		input := map[string]any{"name": "Ada", "token": "sk-live-987654", "password": "hunter2-secret"}
		e.run(t, RunInfo{RunID: "r_redact", AgentID: "greeter"}, greeterIR, input)

		got := e.ioOf(t, "r_redact", "shape")
		if !got.Captured || !strings.Contains(string(got.Input), "[REDACTED]") || !strings.Contains(string(got.Input), `"name":"Ada"`) {
			t.Fatalf("redacted capture: %+v", got)
		}
		// Read every trace table as stored.
		for _, table := range []string{"trace_node_io", "trace_spans", "trace_runs"} {
			var rows []map[string]any
			if err := db.Table(table).Find(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if len(rows) == 0 {
				t.Fatalf("%s is empty", table)
			}
			for _, row := range rows {
				for col, v := range row {
					s := toString(v)
					if strings.Contains(s, "sk-live-987654") || strings.Contains(s, "hunter2-secret") {
						t.Fatalf("%s.%s stores a redacted secret: %s", table, col, s)
					}
				}
			}
		}
	})
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case *string:
		if x != nil {
			return *x
		}
	}
	return ""
}

func TestRetentionExpiryAndPurge(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db, envOptions{})
		e.pols.set("short", Policy{Capture: CaptureFull, RetentionSeconds: int64p(60)})
		e.run(t, RunInfo{RunID: "r_ret", AgentID: "short"}, greeterIR, map[string]any{"name": "Ada", "token": "t"})
		e.pols.set("keep", Policy{Capture: CaptureFull})
		e.run(t, RunInfo{RunID: "r_keep", AgentID: "keep"}, greeterIR, map[string]any{"name": "Bo", "token": "t"})

		if got := e.ioOf(t, "r_ret", "shape"); !got.Captured || got.ExpiresAt == nil {
			t.Fatalf("within retention: %+v", got)
		}
		e.clk.Advance(61 * time.Second)
		// Past the retention, reads are gated even before the purge runs.
		if got := e.ioOf(t, "r_ret", "shape"); got.Reason != ReasonRetentionExpired || got.Input != nil {
			t.Fatalf("expired: %+v", got)
		}
		n, err := e.svc.PurgeExpired(context.Background())
		if err != nil || n != 2 { // shape and out
			t.Fatalf("purge: %d %v", n, err)
		}
		var left int64
		if err := db.Table("trace_node_io").Where("run_id = ? AND (input IS NOT NULL OR output IS NOT NULL)", "r_ret").Count(&left).Error; err != nil || left != 0 {
			t.Fatalf("payloads left after purge: %d %v", left, err)
		}
		if got := e.ioOf(t, "r_ret", "shape"); got.Reason != ReasonRetentionExpired || got.InputMeta["in"].Type != "object" {
			t.Fatalf("after purge: %+v", got)
		}
		if got := e.ioOf(t, "r_keep", "shape"); !got.Captured {
			t.Fatalf("no retention must keep: %+v", got)
		}
		if n, err := e.svc.PurgeExpired(context.Background()); err != nil || n != 0 {
			t.Fatalf("second purge: %d %v", n, err)
		}
	})
}

// TestPurgeStarter runs the module's periodic purge with a short interval.
func TestPurgeStarter(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	e := newEnv(t, db, envOptions{purge: 5 * time.Millisecond})
	e.pols.set("short", Policy{Capture: CaptureFull, RetentionSeconds: int64p(1)})
	e.run(t, RunInfo{RunID: "r_p", AgentID: "short"}, greeterIR, map[string]any{"name": "Ada", "token": "t"})
	if err := e.rec.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(2 * time.Second)
	if err := e.mod.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.mod.Stop(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for {
		var purged int64
		if err := db.Table("trace_node_io").Where("run_id = ? AND purged_at IS NOT NULL AND input IS NULL", "r_p").Count(&purged).Error; err != nil {
			t.Fatal(err)
		}
		if purged == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the purge starter did not purge (purged %d)", purged)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

package runs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/modules/runs"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
)

// A client that goes away cancels a non-durable run: the model call is cancelled upstream
// and the run is recorded failed with client_disconnected.
func TestClientDisconnectCancelsRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		resp, next := openStream(t, b.srv.URL+"/runs", map[string]any{"input": "tell me a long story", "model": "slow"})
		id := resp.Header.Get("X-Run-Id")
		f, ok := next()
		if !ok || f.event != "run" || !strings.Contains(f.data, `"status":"streaming"`) {
			t.Fatalf("first frame %+v", f)
		}
		if f, ok = next(); !ok || f.event != "delta" {
			t.Fatalf("second frame %+v", f)
		}
		<-b.up.started
		if rec := b.srv.Do("GET", "/runs/"+id, nil).Map(t); rec["status"] != "streaming" {
			t.Fatalf("mid-run record %v", rec)
		}
		resp.Body.Close()
		rec := waitRun(t, b.srv, id)
		e, _ := rec["error"].(map[string]any)
		if rec["status"] != "failed" || e["code"] != "client_disconnected" || e["message"] == "" {
			t.Fatalf("after disconnect %v", rec)
		}
		deadline := time.Now().Add(5 * time.Second)
		for b.up.goneCount() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if b.up.goneCount() != 1 {
			t.Fatalf("the upstream call was not cancelled")
		}
		b.obs.mu.Lock()
		out := b.obs.finished[id]
		b.obs.mu.Unlock()
		if out.ErrorCode != "client_disconnected" {
			t.Fatalf("observer outcome %+v", out)
		}
	})
}

// Keepalive comments flow while the model is silent; the stream then completes.
func TestStreamKeepalive(t *testing.T) {
	b := setup(t, dbtest.Open(t, database.SQLite), setupOpts{keepalive: 20 * time.Millisecond})
	resp, next := openStream(t, b.srv.URL+"/runs", map[string]any{"input": "wait", "model": "slow"})
	defer resp.Body.Close()
	var comments int
	var text string
	for comments < 2 {
		f, ok := next()
		if !ok {
			t.Fatal("stream ended early")
		}
		if f.event == "delta" {
			text += f.json(t)["text"].(string)
		}
		if f.event == ":" {
			if f.data != "keepalive" {
				t.Fatalf("comment %q", f.data)
			}
			comments++
		}
	}
	b.up.finish()
	var final, done bool
	for {
		f, ok := next()
		if !ok {
			break
		}
		switch {
		case f.event == "delta":
			text += f.json(t)["text"].(string)
		case f.event == "run" && strings.Contains(f.data, `"completed"`):
			final = true
		case f.event == "" && f.data == "[DONE]":
			done = true
		}
	}
	if !final || !done || text != "echo: wait" {
		t.Fatalf("final %v done %v text %q", final, done, text)
	}
}

// The startup sweep fails non-durable runs left created or streaming, and leaves waiting,
// durable and finished runs alone.
func TestStartupSweep(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		st := b.svc.Store()
		ctx := context.Background()
		mk := func(durable bool) string {
			r, err := st.Insert(ctx, runs.NewRun{Kind: runs.KindGraph, Input: map[string]any{}, Durable: durable})
			if err != nil {
				t.Fatal(err)
			}
			return r.ID
		}
		created, streaming, waiting, durable, done := mk(false), mk(false), mk(false), mk(true), mk(false)
		for _, id := range []string{streaming, waiting, done} {
			if err := st.MarkStreaming(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.MarkWaiting(ctx, waiting, "ask", "ok?", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Finish(ctx, done, runs.RunOutcome{Status: runs.StatusCompleted, Output: "x"}); err != nil {
			t.Fatal(err)
		}
		// A process started after these runs were recorded sweeps them; its own runs stay.
		time.Sleep(2 * time.Millisecond)
		svc2, err := runs.NewService(runs.Options{Store: st, Executor: runtime.New(runtime.Deps{})})
		if err != nil {
			t.Fatal(err)
		}
		own, err := st.Insert(ctx, runs.NewRun{Kind: runs.KindGraph, Input: map[string]any{}, Status: runs.StatusStreaming})
		if err != nil {
			t.Fatal(err)
		}
		mod := runs.New(svc2, runs.ModuleOptions{})
		if err := mod.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if r, _ := st.Get(ctx, own.ID); r.Status != "streaming" {
			t.Fatalf("the sweep failed a run of the new process: %+v", r)
		}
		want := map[string]string{created: "failed", streaming: "failed", waiting: "waiting", durable: "created", done: "completed"}
		for id, status := range want {
			r, err := st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != status {
				t.Errorf("%s: status %s, want %s", id, r.Status, status)
			}
			if status == "failed" {
				if r.Error == nil || r.Error.Code != "interrupted" || r.Error.Message != runs.InterruptedMessage || r.CompletedAt == nil {
					t.Errorf("%s: error %+v", id, r.Error)
				}
			}
		}
		if r, _ := st.Get(ctx, waiting); r.AwaitingNode == nil || *r.AwaitingNode != "ask" || r.Prompt == nil || *r.Prompt != "ok?" {
			t.Errorf("waiting run lost its prompt: %+v", r)
		}
		// A late end never overwrites the sweep's.
		if ok, err := st.Finish(ctx, created, runs.RunOutcome{Status: runs.StatusCompleted}); err != nil || ok {
			t.Fatalf("late finish: %v %v", ok, err)
		}
	})
}

// Background runs cancelled by Stop end failed (interrupted), recorded before Stop returns.
func TestStopInterruptsBackgroundRuns(t *testing.T) {
	b := setup(t, dbtest.Open(t, database.SQLite), setupOpts{})
	b.agents.publish(t, "story", "1", `{"nodes":[{"id":"llm","kind":"llm","model":"slow","prompt":"$in.in.topic"},{"id":"out","kind":"output","value":"$in.in.text"}],"edges":[{"source":"llm","target":"out"}]}`)
	id, err := b.svc.StartAgentRun(t.Context(), runs.AgentRunRequest{AgentID: "story", Input: map[string]any{"topic": "x"}, TriggerID: "trg"})
	if err != nil {
		t.Fatal(err)
	}
	<-b.up.started
	if err := b.svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	r, err := b.svc.Store().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "failed" || r.Error == nil || r.Error.Code != "interrupted" {
		t.Fatalf("after stop: %+v %+v", r, r.Error)
	}
	if _, err := b.svc.StartAgentRun(t.Context(), runs.AgentRunRequest{AgentID: "story", Input: map[string]any{"topic": "x"}}); err == nil {
		t.Fatal("a run started after Stop")
	}
}

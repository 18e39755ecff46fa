package runs_test

import (
	"context"
	"strings"
	"sync/atomic"
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

// The startup sweep fails non-durable runs left created or streaming without an owner (rows
// of a version without leases) once they are older than a lease, and leaves waiting, durable
// and finished runs alone.
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
		// Younger than a lease, an ownerless run may belong to a live replica of an older
		// version: a process starting now leaves it.
		if n, err := b.svc.Sweep(ctx); err != nil || n != 0 {
			t.Fatalf("sweep of young ownerless runs: %d %v", n, err)
		}
		// A process starting two leases later sweeps them; its own runs stay.
		later := func() time.Time { return time.Now().Add(2 * runs.DefaultRunLease) }
		svc2, err := runs.NewService(runs.Options{Store: st, Executor: runtime.New(runtime.Deps{}), Now: later})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc2.Stop(context.Background()) })
		own, err := st.Insert(ctx, runs.NewRun{Kind: runs.KindGraph, Input: map[string]any{}, Status: runs.StatusStreaming,
			LeaseOwner: svc2.Owner(), LeaseUntil: later().Add(runs.DefaultRunLease)})
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

// Two replicas on one database: a replica that starts (and sweeps) leaves the runs another
// live replica executes alone, fails those of a replica that stopped renewing its leases once
// they expire, and a replica whose run was swept while it could not renew (a database outage
// longer than the lease) cancels that run, so its caller sees what the record says.
func TestSweepAcrossReplicas(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		// One clock for both replicas, moved forward by the test instead of waiting.
		var skew atomic.Int64
		now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		advance := func() { skew.Add(int64(2 * runs.DefaultRunLease)) }
		a := setup(t, db, setupOpts{owner: "replica-a", now: now})
		b := setup(t, db, setupOpts{owner: "replica-b", now: now})
		st := a.svc.Store()

		resp, next := openStream(t, a.srv.URL+"/runs", map[string]any{"input": "a long story", "model": "slow"})
		defer resp.Body.Close()
		live := resp.Header.Get("X-Run-Id")
		if f, ok := next(); !ok || f.event != "run" || !strings.Contains(f.data, `"streaming"`) {
			t.Fatalf("first frame %+v", f)
		}
		<-a.up.started
		// A replica that died (no heartbeat will ever come) and a row from before leases.
		dead, err := st.Insert(ctx, runs.NewRun{Kind: runs.KindGraph, Input: map[string]any{}, Status: runs.StatusStreaming,
			LeaseOwner: "replica-dead", LeaseUntil: now().Add(runs.DefaultRunLease)})
		if err != nil {
			t.Fatal(err)
		}
		legacy, err := st.Insert(ctx, runs.NewRun{Kind: runs.KindGraph, Input: map[string]any{}, Status: runs.StatusStreaming})
		if err != nil {
			t.Fatal(err)
		}
		status := func(id string) *runs.Run {
			t.Helper()
			r, err := st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}

		// Replica B starts while A executes: nothing is expired, nothing is swept.
		if err := runs.New(b.svc, runs.ModuleOptions{}).Start(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{live, dead.ID, legacy.ID} {
			if r := status(id); r.Status != runs.StatusStreaming {
				t.Fatalf("%s swept at B's start: %+v %+v", id, r, r.Error)
			}
		}

		// Two leases later: A renewed its lease, the dead replica did not.
		advance()
		if err := a.svc.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := b.svc.Sweep(ctx); err != nil || n != 2 {
			t.Fatalf("sweep: %d %v", n, err)
		}
		for _, id := range []string{dead.ID, legacy.ID} {
			r := status(id)
			if r.Status != runs.StatusFailed || r.Error == nil || r.Error.Code != "interrupted" || r.Error.Message != runs.InterruptedMessage || r.CompletedAt == nil {
				t.Fatalf("%s after expiry: %+v %+v", id, r, r.Error)
			}
		}
		if r := status(live); r.Status != runs.StatusStreaming {
			t.Fatalf("the live replica's run was swept: %+v %+v", r, r.Error)
		}

		// A stops renewing (as if the database were out of its reach for longer than a lease):
		// B fails the run, and A's next heartbeat cancels it.
		advance()
		if n, err := b.svc.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("sweep of the unrenewed run: %d %v", n, err)
		}
		if err := a.svc.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		var final frame
		for {
			f, ok := next()
			if !ok {
				break
			}
			if f.event == "run" {
				final = f
			}
		}
		fe, _ := final.json(t)["error"].(map[string]any)
		if final.json(t)["status"] != "failed" || fe["code"] != "interrupted" || fe["message"] != runs.InterruptedMessage {
			t.Fatalf("final frame of the swept run %+v", final)
		}
		r := status(live)
		if r.Status != runs.StatusFailed || r.Error == nil || r.Error.Message != runs.InterruptedMessage {
			t.Fatalf("record of the swept run %+v %+v", r, r.Error)
		}
		deadline := time.Now().Add(5 * time.Second)
		for a.up.goneCount() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if a.up.goneCount() != 1 {
			t.Fatal("the swept run's model call was not cancelled")
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

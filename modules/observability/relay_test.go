package observability

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/events"
	"github.com/svc-dev/svc/platform/events/pgrelay"
)

// relayedBus is one replica's bus, relayed over PostgreSQL LISTEN/NOTIFY.
func relayedBus(t *testing.T, url string, db *database.DB) *events.Bus {
	t.Helper()
	r, err := pgrelay.New(pgrelay.Options{URL: url, DB: db.SQL(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	bus := events.NewBus(events.Options{Relay: r})
	r.Start(bus)
	t.Cleanup(func() { _ = r.Close(); bus.Close() })
	select {
	case <-r.Listening():
	case <-time.After(15 * time.Second):
		t.Fatal("relay never listened")
	}
	return bus
}

// Two replicas on one PostgreSQL: a client streaming the trace of a run from replica B sees
// the spans replica A records live, then done.
func TestTraceStreamAcrossReplicas(t *testing.T) {
	url := dbtest.URL(t)
	open := func() *database.DB {
		db, err := database.Open(context.Background(), url, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	dbA, dbB := open(), open()
	if err := dbA.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := newEnv(t, dbA, envOptions{bus: relayedBus(t, url, dbA)})
	b := newEnv(t, dbB, envOptions{bus: relayedBus(t, url, dbB), keepalive: time.Hour})

	ctx := context.Background()
	info := RunInfo{RunID: "r_replicas", AgentID: "a"}
	t0 := a.clk.Now()
	sink := a.rec.RunStarted(ctx, info)
	sink.Emit(runtime.Event{Type: runtime.EventNodeStarted, NodeID: "first", Kind: "transform", Start: t0})
	sink.Emit(runtime.Event{Type: runtime.EventNodeFinished, NodeID: "first", Kind: "transform", Start: t0, End: t0.Add(time.Millisecond), Status: runtime.NodeOK})
	if err := a.rec.FlushRun(ctx, info.RunID); err != nil {
		t.Fatal(err)
	}

	// B knows the run only from the database: its history first.
	s := openStream(t, b, info.RunID)
	history := map[string]string{}
	for len(history) < 2 {
		f, ok := s.next()
		if !ok {
			t.Fatal("stream ended in the history")
		}
		var sp Span
		decode(t, []byte(f.data), &sp)
		history[sp.Kind+"/"+sp.NodeID] = f.event
	}
	if history[KindRun+"/"] != EventSpanOpen || history[KindNode+"/first"] != EventSpanClose {
		t.Fatalf("history %v", history)
	}

	// Then A's live spans, relayed.
	t1 := t0.Add(2 * time.Millisecond)
	sink.Emit(runtime.Event{Type: runtime.EventNodeStarted, NodeID: "second", Kind: "llm", Start: t1})
	sink.Emit(runtime.Event{Type: runtime.EventNodeFinished, NodeID: "second", Kind: "llm", Start: t1, End: t1.Add(time.Millisecond), Status: runtime.NodeOK,
		Attr: runtime.Attribution{Model: "m", TokensIn: 3, TokensOut: 4}})
	a.rec.RunFinished(ctx, info, RunOutcome{Status: runtime.StatusCompleted, CompletedAt: t1.Add(time.Millisecond)})

	if sp := s.span(EventSpanOpen); sp.NodeID != "second" || sp.Kind != KindNode || sp.RunID != info.RunID {
		t.Fatalf("relayed open: %+v", sp)
	}
	if sp := s.span(EventSpanOpen); sp.Kind != KindModelCall {
		t.Fatalf("relayed call open: %+v", sp)
	}
	if sp := s.span(EventSpanClose); sp.NodeID != "second" || sp.Attributes.TokensOut != 4 || sp.Attributes.Model != "m" {
		t.Fatalf("relayed close: %+v", sp)
	}
	if sp := s.span(EventSpanClose); sp.Kind != KindModelCall {
		t.Fatalf("relayed call close: %+v", sp)
	}
	if sp := s.span(EventSpanClose); sp.Kind != KindRun || sp.Status != StatusOK {
		t.Fatalf("relayed run close: %+v", sp)
	}
	if d := s.done(); d["status"] != StatusOK || d["run_id"] != info.RunID {
		t.Fatalf("done: %v", d)
	}
}

// Relayed payloads are raw JSON: only well-formed events of the streamed run are accepted.
func TestDecodeStreamEvent(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"type":"span.open","span":{"run_id":"r","span_id":"s","status":"running"}}`, true},
		{`{"type":"done","status":"ok"}`, true},
		{`{"type":"span.open","span":{"run_id":"other","span_id":"s"}}`, false},
		{`{"type":"span.close"}`, false},
		{`{"type":"span.open","span":{"run_id":"r"}}`, false},
		{`{"type":"bogus"}`, false},
		{`[]`, false},
		{`nope`, false},
	} {
		if _, ok := DecodeStreamEvent("r", []byte(c.in)); ok != c.ok {
			t.Errorf("%s: ok %v", c.in, ok)
		}
	}
}

// Relayed stream events arrive from the database's notification channel: decoding never
// panics and never accepts a span of another run.
func FuzzDecodeStreamEvent(f *testing.F) {
	for _, s := range []string{`{"type":"span.open","span":{"run_id":"r","span_id":"s"}}`, `{"type":"done"}`, `{"type":"span.close","span":null}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		se, ok := DecodeStreamEvent("r", b)
		if ok && se.Type != EventDone && (se.Span == nil || se.Span.RunID != "r") {
			t.Fatalf("accepted %q as %+v", b, se)
		}
	})
}

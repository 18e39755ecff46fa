package observability

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
)

// sseReader reads frames (and keepalive comments) from a trace stream.
type sseReader struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

type frame struct {
	event   string
	data    string
	comment string
}

func openStream(t *testing.T, e *env, runID string) *sseReader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/runs/"+runID+"/trace/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sseReader{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next frame or comment; ok is false at the end of the stream.
func (r *sseReader) next() (frame, bool) {
	var f frame
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if f != (frame{}) {
				return f, true
			}
		case strings.HasPrefix(line, ": "):
			return frame{comment: strings.TrimPrefix(line, ": ")}, true
		case strings.HasPrefix(line, "event: "):
			f.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			f.data += strings.TrimPrefix(line, "data: ")
		}
	}
	return f, false
}

// span reads the next non-comment frame, which must be ev, and returns its span.
func (r *sseReader) span(ev string) Span {
	r.t.Helper()
	for {
		f, ok := r.next()
		if !ok {
			r.t.Fatalf("stream ended, want %s", ev)
		}
		if f.comment != "" {
			continue
		}
		if f.event != ev {
			r.t.Fatalf("got %s %s, want %s", f.event, f.data, ev)
		}
		var sp Span
		if err := json.Unmarshal([]byte(f.data), &sp); err != nil {
			r.t.Fatalf("decode %s: %v", f.data, err)
		}
		return sp
	}
}

func (r *sseReader) done() map[string]string {
	r.t.Helper()
	for {
		f, ok := r.next()
		if !ok {
			r.t.Fatal("stream ended before done")
		}
		if f.comment != "" {
			continue
		}
		if f.event != EventDone {
			r.t.Fatalf("got %s %s, want done", f.event, f.data)
		}
		var d map[string]string
		if err := json.Unmarshal([]byte(f.data), &d); err != nil {
			r.t.Fatal(err)
		}
		return d
	}
}

func TestStreamReplayLiveDone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db, envOptions{keepalive: 10 * time.Millisecond})
		ctx := context.Background()
		info := RunInfo{RunID: "r_stream", AgentID: "a"}
		t0 := e.clk.Now()
		sink := e.rec.RunStarted(ctx, info)
		sink.Emit(runtime.Event{Type: runtime.EventNodeStarted, NodeID: "first", Kind: "transform", Start: t0})
		sink.Emit(runtime.Event{Type: runtime.EventNodeFinished, NodeID: "first", Kind: "transform", Start: t0, End: t0.Add(time.Millisecond), Status: runtime.NodeOK})

		// Joining mid-run: the spans so far, in start order.
		s := openStream(t, e, "r_stream")
		if sp := s.span(EventSpanOpen); sp.Kind != KindRun || sp.Status != StatusRunning {
			t.Fatalf("history run span: %+v", sp)
		}
		if sp := s.span(EventSpanClose); sp.NodeID != "first" || sp.Status != StatusOK {
			t.Fatalf("history first: %+v", sp)
		}
		// Nothing happens for a while: keepalive comments arrive.
		if f, ok := s.next(); !ok || f.comment != "keepalive" {
			t.Fatalf("want keepalive, got %+v", f)
		}

		// Live spans, then done.
		t1 := t0.Add(2 * time.Millisecond)
		sink.Emit(runtime.Event{Type: runtime.EventNodeStarted, NodeID: "second", Kind: "llm", Start: t1})
		sink.Emit(runtime.Event{Type: runtime.EventNodeFinished, NodeID: "second", Kind: "llm", Start: t1, End: t1.Add(time.Millisecond), Status: runtime.NodeOK,
			Attr: runtime.Attribution{Model: "m", TokensIn: 3, TokensOut: 4}})
		sink.Emit(runtime.Event{Type: runtime.EventNodeSkipped, NodeID: "third", Kind: "transform", End: t1})
		e.rec.RunFinished(ctx, info, RunOutcome{Status: runtime.StatusCompleted, CompletedAt: t1.Add(time.Millisecond)})

		if sp := s.span(EventSpanOpen); sp.NodeID != "second" || sp.Kind != KindNode {
			t.Fatalf("live open: %+v", sp)
		}
		if sp := s.span(EventSpanOpen); sp.Kind != KindModelCall {
			t.Fatalf("live call open: %+v", sp)
		}
		if sp := s.span(EventSpanClose); sp.NodeID != "second" || sp.Attributes.TokensOut != 4 {
			t.Fatalf("live close: %+v", sp)
		}
		if sp := s.span(EventSpanClose); sp.Kind != KindModelCall || sp.Name != "chat m" {
			t.Fatalf("live call close: %+v", sp)
		}
		if sp := s.span(EventSpanClose); sp.NodeID != "third" || sp.Status != StatusSkipped {
			t.Fatalf("skipped: %+v", sp)
		}
		if sp := s.span(EventSpanClose); sp.Kind != KindRun || sp.Status != StatusOK {
			t.Fatalf("run close: %+v", sp)
		}
		if d := s.done(); d["status"] != StatusOK || d["run_id"] != "r_stream" {
			t.Fatalf("done: %v", d)
		}
		if f, ok := s.next(); ok {
			t.Fatalf("stream continues after done: %+v", f)
		}

		// A finished run: every span, then done, then the end.
		s = openStream(t, e, "r_stream")
		seen := map[string]bool{}
		for {
			f, ok := s.next()
			if !ok {
				t.Fatal("ended without done")
			}
			if f.comment != "" {
				continue
			}
			if f.event == EventDone {
				break
			}
			var sp Span
			decode(t, []byte(f.data), &sp)
			if f.event != EventSpanClose || seen[sp.SpanID] {
				t.Fatalf("replay of a finished run: %s %+v", f.event, sp)
			}
			seen[sp.SpanID] = true
		}
		if len(seen) != 5 { // run, first, second, its call, third
			t.Fatalf("replayed %d spans", len(seen))
		}
		if _, ok := s.next(); ok {
			t.Fatal("stream continues after done")
		}
	})
}

func TestSpanFilterDedupes(t *testing.T) {
	f := &spanFilter{sent: map[string]string{}}
	open := Span{SpanID: "s", Status: StatusRunning}
	closed := Span{SpanID: "s", Status: StatusOK}
	steps := []struct {
		ev   StreamEvent
		pass bool
	}{
		{StreamEvent{Type: EventSpanOpen, Span: &open}, true},
		{StreamEvent{Type: EventSpanOpen, Span: &open}, false}, // from history and live
		{StreamEvent{Type: EventSpanClose, Span: &closed}, true},
		{StreamEvent{Type: EventSpanClose, Span: &closed}, false},
		{StreamEvent{Type: EventSpanOpen, Span: &open}, false}, // a late open after close
		{StreamEvent{Type: EventDone}, false},
	}
	for i, s := range steps {
		if _, ok := f.pass(s.ev); ok != s.pass {
			t.Fatalf("step %d: pass=%v", i, ok)
		}
	}
	// A parked span may open and close again on resume.
	w := &spanFilter{sent: map[string]string{}}
	waiting := Span{SpanID: "h", Status: StatusWaiting}
	reopened := Span{SpanID: "h", Status: StatusRunning}
	resumed := Span{SpanID: "h", Status: StatusOK}
	for i, ev := range []StreamEvent{{Type: EventSpanClose, Span: &waiting}, {Type: EventSpanOpen, Span: &reopened}, {Type: EventSpanClose, Span: &resumed}} {
		if _, ok := w.pass(ev); !ok {
			t.Fatalf("resume step %d filtered", i)
		}
	}
}

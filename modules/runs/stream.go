package runs

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/httpx"
)

// Stream frames (IR.md "Run stream"): camelCase keys.
type runFrame struct {
	RunID  string          `json:"runId"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
	Note   string          `json:"note,omitempty"`
	Error  *RunError       `json:"error,omitempty"`
}

type textFrame struct {
	RunID  string `json:"runId"`
	NodeID string `json:"nodeId"`
	Text   string `json:"text"`
}

// pending is a delta or reasoning frame waiting for the writer.
type pending struct {
	event string // "delta" or "reasoning"
	node  string
	text  string
}

// streamQueue is the executor-side end of a run stream. Emit never blocks: it appends to a
// queue under a mutex and pokes the writer through a one-slot channel. Text frames that pile
// up while the client is slower than the model are merged (consecutive frames of the same
// node and kind), so nothing is dropped and a slow client gets fewer, larger frames.
type streamQueue struct {
	answer map[string]bool
	mu     sync.Mutex
	queue  []pending
	signal chan struct{}
}

func newStreamQueue(answer map[string]bool) *streamQueue {
	return &streamQueue{answer: answer, signal: make(chan struct{}, 1)}
}

// Emit implements runtime.EventSink: only answer tokens (and their reasoning) of the llm
// nodes that feed the output reach the stream.
func (q *streamQueue) Emit(e runtime.Event) {
	var name string
	switch e.Type {
	case runtime.EventDelta:
		name = "delta"
	case runtime.EventReasoning:
		name = "reasoning"
	default:
		return
	}
	if e.Parent != "" || !q.answer[e.NodeID] || e.Text == "" {
		return
	}
	q.mu.Lock()
	if n := len(q.queue); n > 0 && q.queue[n-1].event == name && q.queue[n-1].node == e.NodeID {
		q.queue[n-1].text += e.Text
	} else {
		q.queue = append(q.queue, pending{event: name, node: e.NodeID, text: e.Text})
	}
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *streamQueue) drain() []pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.queue
	q.queue = nil
	return out
}

// streamRun writes a run as SSE: the streaming status frame, answer deltas and reasoning as
// they come, keepalive comments, the final status frame and "data: [DONE]". A client that
// goes away cancels the run, which is recorded failed with client_disconnected.
func (m *Module) streamRun(c echo.Context, p *prepared, r *Run) error {
	sse, err := httpx.NewSSE(c, httpx.SSEOptions{Keepalive: -1})
	if err != nil {
		// The response could not be opened as a stream; the run never started.
		m.svc.abandon(c.Request().Context(), r.ID)
		return err
	}
	reqCtx := c.Request().Context()
	ctx, cancel := context.WithCancelCause(reqCtx)
	defer cancel(nil)
	q := newStreamQueue(p.answer)
	done := make(chan RunOutcome, 1)
	go func() {
		out, _ := m.svc.execute(ctx, p, r, q)
		done <- out
	}()

	gone := func() error {
		cancel(ErrClientDisconnected)
		<-done // the run ends and is recorded before the handler returns
		return nil
	}
	if err := sse.Event("run", runFrame{RunID: r.ID, Status: StatusStreaming}); err != nil {
		return gone()
	}
	flush := func() error {
		for _, f := range q.drain() {
			if err := sse.Event(f.event, textFrame{RunID: r.ID, NodeID: f.node, Text: f.text}); err != nil {
				return err
			}
		}
		return nil
	}
	tick := time.NewTicker(m.keepalive)
	defer tick.Stop()
	for {
		select {
		case <-reqCtx.Done():
			return gone()
		case <-q.signal:
			if err := flush(); err != nil {
				return gone()
			}
		case <-tick.C:
			if err := sse.Comment("keepalive"); err != nil {
				return gone()
			}
		case out := <-done:
			if err := flush(); err != nil {
				return nil
			}
			if err := sse.Event("run", finalFrame(r.ID, out)); err != nil {
				return nil
			}
			_ = sse.Data("[DONE]")
			return nil
		}
	}
}

// finalFrame is the last status frame: output (and note) when completed, error when failed.
func finalFrame(id string, out RunOutcome) runFrame {
	f := runFrame{RunID: id, Status: out.Status, Note: out.Note}
	if out.Status == StatusFailed {
		f.Error = &RunError{Code: out.ErrorCode, Message: out.ErrorMessage}
		return f
	}
	f.Output = encodeOutput(out.Output)
	return f
}

func encodeOutput(v any) json.RawMessage {
	s, err := encodeJSON(v)
	if err != nil || s == nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(*s)
}

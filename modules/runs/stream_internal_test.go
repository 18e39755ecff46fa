package runs

import (
	"testing"

	"github.com/svc-dev/svc/modules/graph/runtime"
)

// When the writer falls behind, consecutive text frames of one node and kind merge; nothing
// else does, and tokens of non-answer or nested nodes never reach the stream.
func TestStreamQueueCoalesces(t *testing.T) {
	q := newStreamQueue(map[string]bool{"a": true, "b": true})
	emit := func(typ runtime.EventType, node, parent, text string) {
		q.Emit(runtime.Event{Type: typ, NodeID: node, Parent: parent, Text: text})
	}
	emit(runtime.EventDelta, "a", "", "Hel")
	emit(runtime.EventDelta, "a", "", "lo")
	emit(runtime.EventReasoning, "a", "", "hmm")
	emit(runtime.EventDelta, "a", "", " world")
	emit(runtime.EventDelta, "b", "", "B")
	emit(runtime.EventDelta, "c", "", "not an answer node")
	emit(runtime.EventDelta, "a", "loop/1", "nested")
	emit(runtime.EventNodeFinished, "a", "", "")
	emit(runtime.EventDelta, "b", "", "")
	select {
	case <-q.signal:
	default:
		t.Fatal("the writer was not signalled")
	}
	got := q.drain()
	want := []pending{{"delta", "a", "Hello"}, {"reasoning", "a", "hmm"}, {"delta", "a", " world"}, {"delta", "b", "B"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("frame %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if len(q.drain()) != 0 {
		t.Fatal("drain did not empty the queue")
	}
}

package events_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/svc-dev/svc/platform/events"
)

// drain reads a closed-or-closing channel to the end and returns the topics seen.
func drain(s *events.Subscription) []string {
	var topics []string
	for e := range s.C() {
		topics = append(topics, e.Topic)
	}
	return topics
}

func TestFilters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		filter string
		want   []string
	}{
		{"run.abc", []string{"run.abc"}},
		{"run.abc.*", []string{"run.abc.span", "run.abc.span.open"}},
		{"run.*", []string{"run.abc", "run.abc.span", "run.abc.span.open", "run.abd", "run.*x"}},
		{"*", []string{"run", "run.abc", "run.abc.span", "run.abc.span.open", "run.abd", "trace.1", "run.*x"}},
		{"run.*x", []string{"run.*x"}}, // '*' not at the end is literal
		{"run", []string{"run"}},
		{"nothing", nil},
	}
	topics := []string{"run", "run.abc", "run.abc.span", "run.abc.span.open", "run.abd", "trace.1", "run.*x"}
	for _, tc := range cases {
		t.Run(tc.filter, func(t *testing.T) {
			t.Parallel()
			bus := events.NewBus(events.Options{})
			sub := bus.Subscribe(tc.filter, 16)
			for _, topic := range topics {
				bus.Publish(topic, nil)
			}
			bus.Close()
			if got := drain(sub); !slices.Equal(got, tc.want) {
				t.Fatalf("filter %q got %v, want %v", tc.filter, got, tc.want)
			}
		})
	}
}

func TestPayloadAndSeq(t *testing.T) {
	t.Parallel()
	bus := events.NewBus(events.Options{})
	defer bus.Close()
	sub := bus.Subscribe("run.1", 4)
	bus.Publish("run.2", "other")
	bus.Publish("run.1", map[string]int{"n": 1})
	bus.Publish("run.1", "second")
	a, b := <-sub.C(), <-sub.C()
	if a.Payload.(map[string]int)["n"] != 1 || b.Payload != "second" {
		t.Fatalf("payloads %v %v", a.Payload, b.Payload)
	}
	if a.Seq == 0 || b.Seq <= a.Seq {
		t.Fatalf("seq not increasing: %d then %d", a.Seq, b.Seq)
	}
}

func TestSlowSubscriberIsDroppedAndTold(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var dropped []string
	bus := events.NewBus(events.Options{OnDrop: func(f string) {
		mu.Lock()
		dropped = append(dropped, f)
		mu.Unlock()
	}})
	defer bus.Close()
	slow := bus.Subscribe("run.*", 2)
	fast := bus.Subscribe("run.*", 10)

	for i := range 5 {
		bus.Publish(fmt.Sprintf("run.%d", i), i) // never blocks although slow never reads
	}
	if got := drain(slow); !slices.Equal(got, []string{"run.0", "run.1"}) {
		t.Fatalf("slow subscriber got %v; want the two that fit", got)
	}
	if !errors.Is(slow.Err(), events.ErrSlowSubscriber) {
		t.Fatalf("slow.Err() = %v, want ErrSlowSubscriber", slow.Err())
	}
	mu.Lock()
	if !slices.Equal(dropped, []string{"run.*"}) {
		t.Fatalf("OnDrop calls %v", dropped)
	}
	mu.Unlock()

	if fast.Err() != nil {
		t.Fatalf("fast subscriber err %v", fast.Err())
	}
	for i := range 5 {
		if e := <-fast.C(); e.Payload != i {
			t.Fatalf("fast got %v at %d", e.Payload, i)
		}
	}
	slow.Close() // closing a dropped subscription is harmless and keeps its reason
	if !errors.Is(slow.Err(), events.ErrSlowSubscriber) {
		t.Fatalf("reason lost after Close: %v", slow.Err())
	}
}

func TestSubscriptionClose(t *testing.T) {
	t.Parallel()
	bus := events.NewBus(events.Options{})
	defer bus.Close()
	sub := bus.Subscribe("a", 1)
	sub.Close()
	sub.Close() // idempotent
	if _, ok := <-sub.C(); ok {
		t.Fatal("channel open after Close")
	}
	if sub.Err() != nil {
		t.Fatalf("Err after own Close = %v, want nil", sub.Err())
	}
	bus.Publish("a", 1) // no send on the closed channel
}

func TestBusClose(t *testing.T) {
	t.Parallel()
	bus := events.NewBus(events.Options{})
	a := bus.Subscribe("a", 1)
	b := bus.Subscribe("b.*", 1)
	bus.Close()
	bus.Close()
	for _, s := range []*events.Subscription{a, b} {
		if _, ok := <-s.C(); ok {
			t.Fatal("channel open after bus Close")
		}
		if !errors.Is(s.Err(), events.ErrBusClosed) {
			t.Fatalf("Err = %v, want ErrBusClosed", s.Err())
		}
		s.Close()
	}
	late := bus.Subscribe("a", 1)
	if _, ok := <-late.C(); ok || !errors.Is(late.Err(), events.ErrBusClosed) {
		t.Fatalf("subscribe after Close: open=%v err=%v", ok, late.Err())
	}
	bus.Publish("a", 1)
}

type recordingRelay struct {
	mu     sync.Mutex
	topics []string
}

func (r *recordingRelay) Forward(e events.Event) {
	r.mu.Lock()
	r.topics = append(r.topics, e.Topic)
	r.mu.Unlock()
}

func TestRelayForwardsOnlyLocalPublishes(t *testing.T) {
	t.Parallel()
	relay := &recordingRelay{}
	bus := events.NewBus(events.Options{Relay: relay})
	sub := bus.Subscribe("*", 4)
	bus.Publish("mine", 1)
	bus.PublishLocal("from.peer", 2)
	bus.Close()
	if got := drain(sub); !slices.Equal(got, []string{"mine", "from.peer"}) {
		t.Fatalf("local delivery %v", got)
	}
	if !slices.Equal(relay.topics, []string{"mine"}) {
		t.Fatalf("relay got %v, want only the local publish", relay.topics)
	}
	bus.Publish("after.close", 3)
	if len(relay.topics) != 1 {
		t.Fatalf("relay got an event after Close: %v", relay.topics)
	}
}

// TestConcurrent runs publishers, readers, closers and slow subscribers at once; under
// -race it checks the locking, and it checks that a reader with room for everything gets
// every event of its topic, in publish order, with increasing Seq.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	const publishers, perPublisher = 8, 500
	bus := events.NewBus(events.Options{})

	type result struct {
		topic string
		got   []int
		err   error
	}
	results := make(chan result, publishers)
	var readers sync.WaitGroup
	for p := range publishers {
		topic := fmt.Sprintf("run.%d", p)
		sub := bus.Subscribe(topic, perPublisher)
		readers.Add(1)
		go func() {
			defer readers.Done()
			r := result{topic: topic}
			var last uint64
			for e := range sub.C() {
				if e.Seq <= last {
					r.err = fmt.Errorf("seq %d after %d", e.Seq, last)
				}
				last = e.Seq
				r.got = append(r.got, e.Payload.(int))
				if len(r.got) == perPublisher {
					sub.Close()
				}
			}
			if sub.Err() != nil {
				r.err = sub.Err()
			}
			results <- r
		}()
	}

	var churn sync.WaitGroup
	stop := make(chan struct{})
	for range 4 { // subscribers that come and go, and slow ones that get dropped
		churn.Add(1)
		go func() {
			defer churn.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := bus.Subscribe("run.*", 1)
				slow := bus.Subscribe("*", 1)
				<-s.C()
				s.Close()
				for range slow.C() {
				}
				if err := slow.Err(); err != nil && !errors.Is(err, events.ErrSlowSubscriber) && !errors.Is(err, events.ErrBusClosed) {
					t.Errorf("slow err %v", err)
				}
			}
		}()
	}

	var pubs sync.WaitGroup
	for p := range publishers {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			for i := range perPublisher {
				bus.Publish(fmt.Sprintf("run.%d", p), i)
			}
		}()
	}
	pubs.Wait()
	readers.Wait()
	close(results)
	for r := range results {
		if r.err != nil {
			t.Fatalf("%s: %v", r.topic, r.err)
		}
		for i, v := range r.got {
			if v != i {
				t.Fatalf("%s: event %d has payload %d (out of order or lost)", r.topic, i, v)
			}
		}
		if len(r.got) != perPublisher {
			t.Fatalf("%s: got %d events, want %d", r.topic, len(r.got), perPublisher)
		}
	}
	close(stop)
	bus.Close() // wakes churners blocked on <-s.C()
	churn.Wait()
}

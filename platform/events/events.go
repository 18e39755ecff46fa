// Package events is the in-process publish/subscribe bus that carries run, trace and
// other stream events from the code that produces them to the streams that watch them.
//
// Topics are dot-separated names such as "run.<id>" or "run.<id>.span". A subscription
// filter is either
//
//   - an exact topic: "run.abc" matches only "run.abc";
//   - a prefix wildcard ending in ".*": "run.abc.*" matches "run.abc.span" and
//     "run.abc.span.open" (any depth) but not "run.abc" itself;
//   - "*" alone, which matches every topic.
//
// A '*' anywhere else is an ordinary character, so a filter built from a client-supplied id
// can never widen into a wildcard except through its own trailing ".*".
//
// Publish never blocks: each subscriber has a buffered channel, and a subscriber whose
// buffer is full is dropped (its channel is closed and Err reports ErrSlowSubscriber), so one
// stalled stream cannot slow the producers or the other streams.
//
// The bus is local to one process. To carry events across replicas, a Relay (package
// pgrelay: PostgreSQL LISTEN/NOTIFY) receives every locally published event through Forward
// and injects events from other replicas with Bus.PublishLocal; relayed payloads arrive as
// decoded by the relay (raw JSON by default), not as the publisher's Go values.
package events

import (
	"errors"
	"strings"
	"sync"
)

// ErrSlowSubscriber is reported by Subscription.Err when the bus dropped the subscriber
// because its buffer was full.
var ErrSlowSubscriber = errors.New("events: subscriber fell behind and was dropped")

// ErrBusClosed is reported by Subscription.Err when the bus was closed under the subscriber.
var ErrBusClosed = errors.New("events: bus closed")

// DefaultBuffer is the channel capacity used when Subscribe is given a buffer below 1.
const DefaultBuffer = 64

// Event is one published message.
type Event struct {
	Topic   string // dot-separated topic, e.g. "run.abc"
	Payload any    // must be JSON-serialisable when a Relay is configured
	Seq     uint64 // bus-wide sequence number, increasing in delivery order
}

// Relay carries events between replicas; the bus calls Forward for every event published
// with Publish (not PublishLocal), after local delivery.
type Relay interface {
	// Forward hands an event to other replicas. It must not block: queue or drop.
	Forward(e Event)
}

// Options configures a Bus; the zero value is a purely local bus.
type Options struct {
	// Relay, when set, receives every event published on this replica.
	Relay Relay
	// OnDrop, when set, is called (outside the bus lock) with the filter of each subscriber
	// dropped for being slow, so the caller can log or count it.
	OnDrop func(filter string)
}

// Bus is a topic-filtered publish/subscribe hub; it is safe for concurrent use.
type Bus struct {
	opts Options

	// mu serialises publishing, subscribing and closing. Holding it for the whole of a
	// publish is what keeps Seq increasing in every subscriber's channel and makes a
	// send on a closed channel impossible; sends are non-blocking so it is held briefly.
	mu     sync.Mutex
	seq    uint64
	closed bool
	exact  map[string]map[*Subscription]struct{} // by exact topic
	prefix map[string]map[*Subscription]struct{} // by prefix incl. trailing dot; "" for "*"
}

// NewBus returns an empty, open bus.
func NewBus(opts Options) *Bus {
	return &Bus{
		opts:   opts,
		exact:  map[string]map[*Subscription]struct{}{},
		prefix: map[string]map[*Subscription]struct{}{},
	}
}

// Subscription is one subscriber's view of the bus.
type Subscription struct {
	bus    *Bus
	filter string
	key    string // index key: the exact topic or the prefix
	wild   bool   // key is a prefix
	ch     chan Event

	// done and err are guarded by bus.mu.
	done bool
	err  error
}

// Subscribe registers a subscriber for filter (see the package doc for the syntax) with a
// channel of the given capacity (DefaultBuffer when buffer < 1). On a closed bus the
// subscription is returned already closed, with Err reporting ErrBusClosed.
func (b *Bus) Subscribe(filter string, buffer int) *Subscription {
	if buffer < 1 {
		buffer = DefaultBuffer
	}
	s := &Subscription{bus: b, filter: filter, ch: make(chan Event, buffer)}
	switch {
	case filter == "*":
		s.wild, s.key = true, ""
	case strings.HasSuffix(filter, ".*"):
		s.wild, s.key = true, strings.TrimSuffix(filter, "*")
	default:
		s.key = filter
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.done, s.err = true, ErrBusClosed
		close(s.ch)
		return s
	}
	idx := b.exact
	if s.wild {
		idx = b.prefix
	}
	set := idx[s.key]
	if set == nil {
		set = map[*Subscription]struct{}{}
		idx[s.key] = set
	}
	set[s] = struct{}{}
	return s
}

// Publish delivers payload to every matching subscriber without blocking and forwards it to
// the Relay, if any. Publishing on a closed bus does nothing.
func (b *Bus) Publish(topic string, payload any) {
	e, ok := b.deliver(topic, payload)
	if ok && b.opts.Relay != nil {
		b.opts.Relay.Forward(e)
	}
}

// PublishLocal delivers payload to this replica's subscribers only; a Relay uses it for
// events that arrive from other replicas, so they are not forwarded back.
func (b *Bus) PublishLocal(topic string, payload any) {
	b.deliver(topic, payload)
}

func (b *Bus) deliver(topic string, payload any) (Event, bool) {
	var dropped []string
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return Event{}, false
	}
	b.seq++
	e := Event{Topic: topic, Payload: payload, Seq: b.seq}
	send := func(set map[*Subscription]struct{}) {
		for s := range set {
			select {
			case s.ch <- e:
			default:
				b.removeLocked(s, ErrSlowSubscriber)
				dropped = append(dropped, s.filter)
			}
		}
	}
	send(b.exact[topic])
	send(b.prefix[""])
	for i := 0; i < len(topic); i++ {
		if topic[i] == '.' {
			send(b.prefix[topic[:i+1]])
		}
	}
	b.mu.Unlock()

	if b.opts.OnDrop != nil {
		for _, f := range dropped {
			b.opts.OnDrop(f)
		}
	}
	return e, true
}

// removeLocked unregisters s, records why and closes its channel; b.mu must be held.
// Deleting from the set being ranged over is safe in Go.
func (b *Bus) removeLocked(s *Subscription, err error) {
	if s.done {
		return
	}
	s.done, s.err = true, err
	idx := b.exact
	if s.wild {
		idx = b.prefix
	}
	if set := idx[s.key]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(idx, s.key)
		}
	}
	close(s.ch)
}

// Close closes every subscription (Err reports ErrBusClosed) and makes later publishes
// no-ops. It is idempotent.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for _, idx := range []map[string]map[*Subscription]struct{}{b.exact, b.prefix} {
		for _, set := range idx {
			for s := range set {
				b.removeLocked(s, ErrBusClosed)
			}
		}
	}
}

// C is the channel of events; it is closed when the subscription ends for any reason.
func (s *Subscription) C() <-chan Event { return s.ch }

// Filter is the filter the subscription was made with.
func (s *Subscription) Filter() string { return s.filter }

// Close ends the subscription and closes its channel; it is idempotent and safe to call
// concurrently with Publish.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	s.bus.removeLocked(s, nil)
}

// Err says why the channel was closed: nil while open or after Close, ErrSlowSubscriber
// when the subscriber was dropped for falling behind, ErrBusClosed when the bus closed.
// Read it after C is closed.
func (s *Subscription) Err() error {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.err
}

package pgrelay

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/events"
)

// replica is one process's bus with its relay on a schema.
type replica struct {
	bus   *events.Bus
	relay *Relay
}

func newReplica(t *testing.T, url string, decode Decoder) *replica {
	t.Helper()
	db, err := database.Open(context.Background(), url, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	r, err := New(Options{URL: url, DB: db.SQL(), Decode: decode, Logger: zerolog.Nop()})
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
	return &replica{bus: bus, relay: r}
}

// next waits for the subscription's next event.
func next(t *testing.T, s *events.Subscription) events.Event {
	t.Helper()
	select {
	case e, ok := <-s.C():
		if !ok {
			t.Fatalf("subscription %s closed: %v", s.Filter(), s.Err())
		}
		return e
	case <-time.After(15 * time.Second):
		t.Fatalf("no event on %s", s.Filter())
	}
	return events.Event{}
}

func raw(t *testing.T, e events.Event) string {
	t.Helper()
	b, ok := e.Payload.(json.RawMessage)
	if !ok {
		t.Fatalf("payload %T", e.Payload)
	}
	return string(b)
}

// Two buses on one schema hear each other, in order, never their own events twice; a bus on
// another schema of the same database hears neither; oversized events are skipped.
func TestRelayAcrossBuses(t *testing.T) {
	url := dbtest.URL(t)
	a, b := newReplica(t, url, nil), newReplica(t, url, nil)
	other := dbtest.URL(t)
	c, d := newReplica(t, other, nil), newReplica(t, other, nil)

	subA, subB, subC := a.bus.Subscribe("x.*", 16), b.bus.Subscribe("x.*", 16), c.bus.Subscribe("*", 16)
	a.bus.Publish("x.1", map[string]any{"n": 1, "s": "<&>"})
	a.bus.Publish("x.2", []int{2})
	a.bus.Publish("x.big", strings.Repeat("z", MaxPayload))
	a.bus.Publish("x.3", "three")
	for _, want := range []struct{ topic, payload string }{{"x.1", `{"n":1,"s":"\u003c\u0026\u003e"}`}, {"x.2", `[2]`}, {"x.3", `"three"`}} {
		e := next(t, subB)
		if e.Topic != want.topic || raw(t, e) != want.payload {
			t.Fatalf("B got %s %v, want %s %s", e.Topic, e.Payload, want.topic, want.payload)
		}
	}
	if s := a.relay.Stats(); s.Oversized != 1 || s.Dropped != 0 {
		t.Fatalf("A stats %+v", s)
	}
	// A sees its own events once (locally), then B's: never an echo of its own.
	b.bus.Publish("x.4", "from b")
	for _, want := range []string{"x.1", "x.2", "x.big", "x.3", "x.4"} {
		if e := next(t, subA); e.Topic != want {
			t.Fatalf("A got %s, want %s", e.Topic, want)
		}
	}
	// The other schema heard none of the above: its first event is its own pair's.
	d.bus.Publish("y", "other schema")
	if e := next(t, subC); e.Topic != "y" || raw(t, e) != `"other schema"` {
		t.Fatalf("C got %s %v", e.Topic, e.Payload)
	}
	// Events that cannot be encoded are dropped, not sent.
	a.bus.Publish("x.bad", func() {})
	if s := a.relay.Stats(); s.Dropped != 1 {
		t.Fatalf("A stats after an unencodable payload %+v", s)
	}
}

// A Decoder turns payloads into the types subscribers expect; unreadable payloads are skipped.
func TestRelayDecoder(t *testing.T) {
	url := dbtest.URL(t)
	type point struct{ X, Y int }
	decode := func(topic string, p json.RawMessage) (any, error) {
		var pt point
		err := json.Unmarshal(p, &pt)
		return pt, err
	}
	a, b := newReplica(t, url, nil), newReplica(t, url, decode)
	sub := b.bus.Subscribe("p", 4)
	a.bus.Publish("p", "not a point")
	a.bus.Publish("p", point{1, 2})
	if e := next(t, sub); e.Payload != (point{1, 2}) {
		t.Fatalf("decoded %#v", e.Payload)
	}
}

// The listener reconnects after its connection dies; events flow again.
func TestRelayReconnects(t *testing.T) {
	url := dbtest.URL(t)
	a, b := newReplica(t, url, nil), newReplica(t, url, nil)
	sub := b.bus.Subscribe("r", 64)
	b.relay.mu.Lock()
	pid := b.relay.pid
	b.relay.mu.Unlock()
	admin, err := database.Open(context.Background(), url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var killed bool
	if err := admin.SQL().QueryRow("SELECT pg_terminate_backend($1)", int(pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate listener %d: %v %v", pid, killed, err)
	}
	// Events sent while it reconnects are lost (documented); keep sending until one arrives.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		a.bus.Publish("r", "again")
		select {
		case e := <-sub.C():
			if raw(t, e) != `"again"` {
				t.Fatalf("got %v", e.Payload)
			}
			b.relay.mu.Lock()
			newPID := b.relay.pid
			b.relay.mu.Unlock()
			if newPID == pid {
				t.Fatal("the listener did not reconnect")
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("no event after the listener's connection was terminated")
}

func TestChannelPerSchema(t *testing.T) {
	a, b := Channel("db", "s1"), Channel("db", "s2")
	if a == b || Channel("db", "s1") != a || len(a) > 63 || !strings.HasPrefix(a, "svc_events_") {
		t.Fatalf("channels %q %q", a, b)
	}
}

// Notifications on the channel come from anyone who can connect: parsing never panics and
// accepts only complete envelopes.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{`{"o":"a","t":"x","p":1}`, `{"o":"","t":"x","p":1}`, `{"o":"a","t":"x"}`, `null`, `[]`, `{"o":1}`, "\x00", `{"o":"a","t":"x","p":{"span":null}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := parseEnvelope(b)
		if err == nil && (env.Origin == "" || env.Topic == "" || !json.Valid(env.Payload)) {
			t.Fatalf("accepted %q as %+v", b, env)
		}
	})
}

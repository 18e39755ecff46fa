// Package pgrelay carries bus events between control-plane replicas over PostgreSQL
// LISTEN/NOTIFY (DESIGN.md §9): an events.Relay that sends every locally published event as a
// notification and publishes other replicas' notifications on the local bus.
//
// Delivery is best effort, as for the in-process bus: events are queued and sent in the
// background (a full queue drops them), a payload that does not fit in a notification is
// skipped, and events sent while the listening connection is down (it reconnects with
// back-off) are lost. Subscribers that need completeness reconcile with the database, as the
// trace stream does on reconnect.
//
// A notification is a small JSON envelope {"o": origin, "t": topic, "p": payload}: the origin
// is a random id per relay so that a replica ignores its own events, which the local bus has
// already delivered. The channel name is derived from the database and schema names, so two
// deployments (or two test schemas) on one server never hear each other.
package pgrelay

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/events"
)

// MaxPayload is the largest envelope sent, in bytes. PostgreSQL refuses NOTIFY payloads of
// 8000 bytes or more; events whose envelope is larger are skipped (trace span events are a few
// hundred bytes).
const MaxPayload = 7999

// Defaults of Options.
const (
	DefaultQueue = 4096
	// maxBatch bounds the notifications sent in one statement.
	maxBatch = 128
	// minBackoff and maxBackoff bound the wait before reconnecting the listener or retrying
	// a failed send.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// Decoder turns a received payload (raw JSON) into what the bus subscribers of topic expect.
type Decoder func(topic string, payload json.RawMessage) (any, error)

// Options configure a Relay. URL and DB are required.
type Options struct {
	// URL is the PostgreSQL URL of the dedicated listening connection (SERVICE_DATABASE_URL).
	URL string
	// DB is the pool notifications are sent through, and whose database and schema name the
	// channel.
	DB *sql.DB
	// Decode, when set, decodes received payloads; by default subscribers receive the raw
	// JSON as a json.RawMessage.
	Decode Decoder
	// Queue is how many events may wait to be sent (default DefaultQueue); more are dropped.
	Queue  int
	Logger zerolog.Logger
}

// Stats counts what a relay did, for logs and tests.
type Stats struct {
	Sent      uint64 // notifications sent
	Received  uint64 // notifications of other replicas published locally
	Dropped   uint64 // events dropped: queue full, not JSON-serialisable, or a failed send
	Oversized uint64 // events skipped for exceeding MaxPayload
}

// Relay is an events.Relay over PostgreSQL LISTEN/NOTIFY. Build it with New, hand it to
// events.NewBus, then Start it with that bus; Close stops it.
type Relay struct {
	opts   Options
	origin string
	queue  chan []byte
	log    zerolog.Logger

	mu      sync.Mutex
	channel string // derived on first use: the database may be down when the relay is built
	stop    context.CancelFunc
	wg      sync.WaitGroup
	pid     uint32 // backend pid of the listening connection (tests terminate it)

	listening     chan struct{} // closed once the first LISTEN succeeded
	listeningOnce sync.Once

	sent, received, dropped, oversized atomic.Uint64
}

var _ events.Relay = (*Relay)(nil)

// New builds a relay; nothing connects until Start.
func New(opts Options) (*Relay, error) {
	if opts.URL == "" || opts.DB == nil {
		return nil, errors.New("pgrelay: URL and DB are required")
	}
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Relay{
		opts: opts, origin: hex.EncodeToString(b[:]), queue: make(chan []byte, opts.Queue),
		log: opts.Logger.With().Str("component", "pgrelay").Logger(), listening: make(chan struct{}),
	}, nil
}

// envelope is one notification's payload.
type envelope struct {
	Origin  string          `json:"o"`
	Topic   string          `json:"t"`
	Payload json.RawMessage `json:"p"`
}

// Forward queues a locally published event for the other replicas; it never blocks.
func (r *Relay) Forward(e events.Event) {
	p, err := json.Marshal(e.Payload)
	if err != nil {
		r.dropped.Add(1)
		r.log.Debug().Err(err).Str("topic", e.Topic).Msg("event payload is not JSON; not relayed")
		return
	}
	b, err := json.Marshal(envelope{Origin: r.origin, Topic: e.Topic, Payload: p})
	if err != nil {
		r.dropped.Add(1)
		return
	}
	if len(b) > MaxPayload {
		r.oversized.Add(1)
		r.log.Debug().Str("topic", e.Topic).Int("bytes", len(b)).Msg("event too large for NOTIFY; not relayed")
		return
	}
	select {
	case r.queue <- b:
	default:
		r.dropped.Add(1)
	}
}

// Start connects the listener and the sender in the background, publishing received events
// on bus. It is idempotent; the relay keeps retrying while the database is unreachable.
func (r *Relay) Start(bus *events.Bus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop != nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.listen(ctx, bus) }()
	go func() { defer r.wg.Done(); r.send(ctx) }()
}

// Close stops the relay and waits for its goroutines; queued events are dropped.
func (r *Relay) Close() error {
	r.mu.Lock()
	stop := r.stop
	r.mu.Unlock()
	if stop != nil {
		stop()
		r.wg.Wait()
	}
	return nil
}

// Listening is closed once the relay first listens on its channel: events other replicas
// publish from then on reach this one.
func (r *Relay) Listening() <-chan struct{} { return r.listening }

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	return Stats{Sent: r.sent.Load(), Received: r.received.Load(), Dropped: r.dropped.Load(), Oversized: r.oversized.Load()}
}

// Channel derives the notification channel of a database and schema.
func Channel(database, schema string) string {
	h := fnv.New64a()
	h.Write([]byte("svc/events\x00" + database + "\x00" + schema))
	return "svc_events_" + strconv.FormatUint(h.Sum64(), 16)
}

// channelName is the channel of the relay's database, asked once.
func (r *Relay) channelName(ctx context.Context) (string, error) {
	r.mu.Lock()
	ch := r.channel
	r.mu.Unlock()
	if ch != "" {
		return ch, nil
	}
	var dbName, schema string
	if err := r.opts.DB.QueryRowContext(ctx, "SELECT current_database(), current_schema()").Scan(&dbName, &schema); err != nil {
		return "", err
	}
	ch = Channel(dbName, schema)
	r.mu.Lock()
	r.channel = ch
	r.mu.Unlock()
	return ch, nil
}

// listen holds the dedicated LISTEN connection, reconnecting with back-off, and publishes
// other replicas' events on the bus.
func (r *Relay) listen(ctx context.Context, bus *events.Bus) {
	backoff := minBackoff
	failing := false
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, bus, func() { backoff, failing = minBackoff, false })
		if ctx.Err() != nil {
			return
		}
		if !failing {
			r.log.Warn().Err(err).Msg("event relay: listening connection lost; reconnecting")
			failing = true
		}
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// listenOnce connects, listens and delivers until the connection fails or ctx ends.
func (r *Relay) listenOnce(ctx context.Context, bus *events.Bus, connected func()) error {
	ch, err := r.channelName(ctx)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, r.opts.URL)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
		return err
	}
	r.mu.Lock()
	r.pid = conn.PgConn().PID()
	r.mu.Unlock()
	connected()
	r.listeningOnce.Do(func() { close(r.listening) })
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		topic, payload, own, err := r.decode([]byte(n.Payload))
		if err != nil {
			r.log.Debug().Err(err).Msg("event relay: unreadable notification ignored")
			continue
		}
		if own {
			continue
		}
		r.received.Add(1)
		bus.PublishLocal(topic, payload)
	}
}

// decode parses a notification: its topic, its payload as subscribers expect it, and whether
// this relay sent it.
func (r *Relay) decode(b []byte) (topic string, payload any, own bool, err error) {
	env, err := parseEnvelope(b)
	if err != nil {
		return "", nil, false, err
	}
	if env.Origin == r.origin {
		return env.Topic, nil, true, nil
	}
	if r.opts.Decode != nil {
		payload, err = r.opts.Decode(env.Topic, env.Payload)
		if err != nil {
			return "", nil, false, err
		}
		return env.Topic, payload, false, nil
	}
	return env.Topic, env.Payload, false, nil
}

// parseEnvelope reads an envelope; anyone who can NOTIFY on the channel can send one, so it
// is checked: an origin, a topic, and a JSON payload.
func parseEnvelope(b []byte) (envelope, error) {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return envelope{}, err
	}
	if env.Origin == "" || env.Topic == "" || len(env.Payload) == 0 {
		return envelope{}, errors.New("notification is not an event envelope")
	}
	return env, nil
}

// notifySQL sends a batch in one statement, in order: volatile functions in the target list
// are evaluated after the ORDER BY.
const notifySQL = "SELECT pg_notify($1, p) FROM unnest($2::text[]) WITH ORDINALITY AS t(p, i) ORDER BY i"

// send drains the queue in batches through the pool.
func (r *Relay) send(ctx context.Context) {
	backoff := minBackoff
	failing := false
	batch := make([]string, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case b := <-r.queue:
			batch = append(batch, string(b))
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case b := <-r.queue:
				batch = append(batch, string(b))
			default:
				break drain
			}
		}
		err := r.notify(ctx, batch)
		if err == nil {
			r.sent.Add(uint64(len(batch)))
			if failing {
				r.log.Info().Msg("event relay: sending again")
			}
			backoff, failing = minBackoff, false
			continue
		}
		if ctx.Err() != nil {
			return
		}
		// Live events are not worth replaying late: drop the batch, wait, go on.
		r.dropped.Add(uint64(len(batch)))
		if !failing {
			r.log.Warn().Err(err).Msg("event relay: sending notifications failed; events are dropped until it recovers")
			failing = true
		}
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func (r *Relay) notify(ctx context.Context, batch []string) error {
	ch, err := r.channelName(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = r.opts.DB.ExecContext(ctx, notifySQL, ch, batch)
	return err
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

package observability

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/events"
	"github.com/svc-dev/svc/platform/httpx"
)

// DefaultPurgeInterval is how often expired payloads are purged.
const DefaultPurgeInterval = time.Minute

// ModuleOptions configure the HTTP module; Service is required.
type ModuleOptions struct {
	Service *Service
	// Keepalive is the trace stream's comment interval (0: SPEC's 15 s).
	Keepalive time.Duration
	// PurgeInterval is the retention purge period (0: DefaultPurgeInterval).
	PurgeInterval time.Duration
	// Done is closed at server shutdown, ending open trace streams.
	Done <-chan struct{}
	Log  zerolog.Logger
}

// Module serves the observability endpoints and runs the span writer and the retention purge.
type Module struct {
	opts ModuleOptions
	svc  *Service

	purge background
}

// NewModule builds the module; it panics on a nil service (a composition-root bug).
func NewModule(opts ModuleOptions) *Module {
	if opts.Service == nil {
		panic("observability: nil service")
	}
	if opts.PurgeInterval <= 0 {
		opts.PurgeInterval = DefaultPurgeInterval
	}
	return &Module{opts: opts, svc: opts.Service}
}

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	g.GET("/runs/:id/trace", m.trace)
	g.GET("/runs/:id/trace/stream", m.stream)
	g.GET("/runs/:id/nodes/:node_id/io", m.nodeIO)
}

// Start starts the span writer and the retention purge.
func (m *Module) Start(ctx context.Context) error {
	if err := m.svc.rec.Start(ctx); err != nil {
		return err
	}
	return m.purge.start(ctx, m.purgeLoop)
}

// Stop ends the purge, then stops the writer after a final flush.
func (m *Module) Stop(ctx context.Context) error {
	m.purge.stop()
	return m.svc.rec.Stop(ctx)
}

func (m *Module) purgeLoop(ctx context.Context) {
	t := time.NewTicker(m.opts.PurgeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := m.svc.PurgeExpired(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			m.opts.Log.Warn().Err(err).Msg("I/O retention purge failed; will retry")
		case n > 0:
			m.opts.Log.Info().Int64("purged", n).Msg("I/O retention purge")
		}
	}
}

// pathParam returns a path parameter decoded: node ids of nested nodes contain "/", which
// clients send as %2F; echo then routes on the raw path and leaves the value encoded.
func pathParam(c echo.Context, name string) string {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return v
	}
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}

func (m *Module) trace(c echo.Context) error {
	t, err := m.svc.Trace(c.Request().Context(), pathParam(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}

func (m *Module) nodeIO(c echo.Context) error {
	io, err := m.svc.NodeIO(c.Request().Context(), pathParam(c, "id"), pathParam(c, "node_id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, io)
}

// subBuffer is a stream's bus buffer; a client that falls further behind is resynchronised
// from the database.
const subBuffer = 1024

// stream serves GET /runs/{id}/trace/stream: the spans so far, then live ones, then done.
func (m *Module) stream(c echo.Context) error {
	runID := pathParam(c, "id")
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	bus := m.svc.rec.opts.Bus
	// Subscribe before reading history, so nothing falls between the two; duplicates are
	// filtered by span id.
	var sub *events.Subscription
	if bus != nil {
		sub = bus.Subscribe(TraceTopic(runID), subBuffer)
		defer func() { sub.Close() }()
	}
	st, err := m.svc.load(ctx, runID)
	if err != nil {
		return err // before the stream opens: a normal error response (404)
	}
	sse, err := httpx.NewSSE(c, httpx.SSEOptions{Keepalive: m.opts.Keepalive, Done: m.opts.Done})
	if err != nil {
		return err
	}
	frames := make(chan httpx.Frame, 64)
	go func() {
		defer close(frames)
		f := &spanFilter{sent: map[string]string{}}
		send := func(fr httpx.Frame) bool {
			select {
			case frames <- fr:
				return true
			case <-ctx.Done():
				return false
			}
		}
		replay := func(st runState) bool {
			for i := range st.spans {
				if ev, ok := f.pass(StreamEvent{Type: eventOf(st.spans[i]), Span: &st.spans[i]}); ok {
					if !send(httpx.Frame{Event: ev.Type, Data: ev.Span}) {
						return false
					}
				}
			}
			if st.terminal != "" {
				send(httpx.Frame{Event: EventDone, Data: doneData(runID, st.terminal)})
				return false
			}
			return true
		}
		if !replay(st) || sub == nil {
			return // finished, or no bus: history only, then keepalives until the client leaves
		}
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-sub.C():
				if !ok {
					if !errors.Is(sub.Err(), events.ErrSlowSubscriber) {
						return // bus closed: the server is stopping
					}
					// Fell behind: subscribe again and resynchronise from the database.
					sub = bus.Subscribe(TraceTopic(runID), subBuffer)
					st, err := m.svc.load(ctx, runID)
					if err != nil || !replay(st) {
						return
					}
					continue
				}
				se, ok := streamEventOf(runID, e.Payload)
				if !ok {
					continue
				}
				if se.Type == EventDone {
					send(httpx.Frame{Event: EventDone, Data: doneData(runID, se.Status)})
					return
				}
				if ev, ok := f.pass(se); ok && !send(httpx.Frame{Event: ev.Type, Data: ev.Span}) {
					return
				}
			}
		}
	}()
	err = sse.Run(ctx, frames)
	cancel()
	for range frames { // let the producer finish before the deferred unsubscribe
	}
	return err
}

// streamEventOf reads a bus payload: a StreamEvent from this replica's recorder, or the raw
// JSON of one relayed from another replica.
func streamEventOf(runID string, payload any) (StreamEvent, bool) {
	switch p := payload.(type) {
	case StreamEvent:
		return p, true
	case json.RawMessage:
		return DecodeStreamEvent(runID, p)
	}
	return StreamEvent{}, false
}

// DecodeStreamEvent decodes a relayed StreamEvent of run runID; anything else (an unknown
// type, a span of another run, a span event without its span) is refused.
func DecodeStreamEvent(runID string, b []byte) (StreamEvent, bool) {
	var se StreamEvent
	if err := json.Unmarshal(b, &se); err != nil {
		return StreamEvent{}, false
	}
	switch se.Type {
	case EventDone:
		return StreamEvent{Type: EventDone, Status: se.Status}, true
	case EventSpanOpen, EventSpanClose:
		if se.Span == nil || se.Span.RunID != runID || se.Span.SpanID == "" {
			return StreamEvent{}, false
		}
		return se, true
	}
	return StreamEvent{}, false
}

func eventOf(sp Span) string {
	if sp.Closed() {
		return EventSpanClose
	}
	return EventSpanOpen
}

func doneData(runID, status string) map[string]string {
	return map[string]string{"run_id": runID, "status": status}
}

// spanFilter drops events a client has already seen: the same span opened twice, or closed
// again with the same status. A span that was parked (waiting) may open and close again.
type spanFilter struct {
	sent map[string]string // span id → last status sent
}

func (f *spanFilter) pass(e StreamEvent) (StreamEvent, bool) {
	if e.Span == nil {
		return e, false
	}
	prev, seen := f.sent[e.Span.SpanID]
	switch e.Type {
	case EventSpanOpen:
		if seen && prev != StatusWaiting {
			return e, false
		}
	case EventSpanClose:
		if seen && prev == e.Span.Status {
			return e, false
		}
	default:
		return e, false
	}
	f.sent[e.Span.SpanID] = e.Span.Status
	return e, true
}

package observability

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/events"
)

// Stream event types, also the SSE event names of GET /runs/{id}/trace/stream.
const (
	EventSpanOpen  = "span.open"
	EventSpanClose = "span.close"
	EventDone      = "done"
)

// StreamEvent is what the recorder publishes on the bus topic TraceTopic(runID). It is
// JSON-serialisable so that a relay can carry it to other replicas, where it arrives as raw
// JSON (see DecodeStreamEvent).
type StreamEvent struct {
	Type   string `json:"type"`
	Span   *Span  `json:"span,omitempty"`
	Status string `json:"status,omitempty"` // done: the run span's final status
}

// TraceTopic is the bus topic of a run's live spans.
func TraceTopic(runID string) string { return "trace." + runID }

// Defaults of RecorderOptions.
const (
	DefaultFlushInterval = 200 * time.Millisecond
	DefaultMaxIOBytes    = 256 << 10
	// flushBatch is how many dirty spans make the writer flush before its tick.
	flushBatch = 256
	// maxFlushFailures drops a finished run's unwritten spans after this many failed flushes, so
	// a database outage cannot grow memory without bound.
	maxFlushFailures = 50
)

// RecorderOptions configure a Recorder; DB is required.
type RecorderOptions struct {
	DB       *database.DB
	Bus      *events.Bus  // nil: no live trace stream
	Policies PolicySource // nil: DefaultPolicy for every run
	Log      zerolog.Logger
	Metrics  *Metrics     // nil: no run/node metrics
	Exporter SpanExporter // nil: no OpenTelemetry export
	// FlushInterval is the background writer's period (default DefaultFlushInterval).
	FlushInterval time.Duration
	// MaxIOBytes bounds each captured input or output (JSON bytes); larger payloads keep
	// their metadata only (default DefaultMaxIOBytes).
	MaxIOBytes int
	Now        func() time.Time
}

// SpanExporter ships closed spans elsewhere (OpenTelemetry); it is called by the background
// writer, never on a run's hot path.
type SpanExporter interface {
	Export(ctx context.Context, info RunInfo, spans []Span)
}

// Recorder is the runs module's observer: it turns runtime events into spans held in a per-run
// buffer, publishes them live on the bus, and a background writer persists them in batches.
// Emit never touches the database.
type Recorder struct {
	opts  RecorderOptions
	store *store
	log   zerolog.Logger

	mu   sync.Mutex
	runs map[string]*liveRun

	// flushMu serialises flushes (background, on demand, final) and guards liveRun's
	// writer-only fields.
	flushMu sync.Mutex
	kick    chan struct{}

	writer background
}

// NewRecorder builds a recorder; it panics on a nil database (a composition-root bug).
func NewRecorder(opts RecorderOptions) *Recorder {
	if opts.DB == nil {
		panic("observability: nil database")
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.MaxIOBytes <= 0 {
		opts.MaxIOBytes = DefaultMaxIOBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Recorder{
		opts:  opts,
		store: &store{db: opts.DB},
		log:   opts.Log,
		runs:  map[string]*liveRun{},
		kick:  make(chan struct{}, 1),
	}
}

// liveRun is the in-memory buffer of one run being recorded in this process.
type liveRun struct {
	r    *Recorder
	info RunInfo

	mu       sync.Mutex
	spans    map[string]*spanState
	dirty    map[string]struct{}
	io       []capturedIO
	finished bool

	// Writer-only fields, guarded by Recorder.flushMu.
	registered bool
	policy     *Policy
	exported   map[string]bool
	failures   int
}

type spanState struct {
	span Span
	// restored: the latest state came from a checkpointed result, not from execution in this
	// process, so it must not overwrite a span already written by the run that produced it.
	restored bool
}

type capturedIO struct {
	nodeID   string
	input    map[string]any
	output   map[string]any
	at       time.Time
	restored bool
}

// RunStarted opens the run span and returns the sink the executor emits into.
func (r *Recorder) RunStarted(_ context.Context, info RunInfo) runtime.EventSink {
	now := r.opts.Now().UTC()
	start := info.StartedAt.UTC()
	if info.StartedAt.IsZero() {
		start = now
	}
	r.mu.Lock()
	lr := r.runs[info.RunID]
	if lr == nil {
		lr = &liveRun{r: r, spans: map[string]*spanState{}, dirty: map[string]struct{}{}, exported: map[string]bool{}}
		r.runs[info.RunID] = lr
	}
	// Reopened under r.mu, so a concurrent forget cannot drop the buffer this run writes into.
	lr.mu.Lock()
	lr.info, lr.finished = info, false
	r.mu.Unlock()
	name := "run"
	if info.AgentID != "" {
		name = "run " + info.AgentID
	}
	sp := Span{RunID: info.RunID, SpanID: SpanID(info.RunID, ""), Name: name, Kind: KindRun, Start: start, Status: StatusRunning,
		Attributes: Attributes{Agent: info.AgentID, Version: info.Version, ContentHash: info.ContentHash,
			SessionID: info.SessionID, TriggerID: info.TriggerID, RunKind: info.Kind}}
	lr.setLocked(sp, false)
	lr.mu.Unlock()
	r.publish(info.RunID, StreamEvent{Type: EventSpanOpen, Span: &sp})
	return lr
}

// RunFinished closes the run span (status waiting for a parked run) and hands the run to the
// writer; it does not wait for the database.
func (r *Recorder) RunFinished(_ context.Context, info RunInfo, res RunOutcome) {
	r.mu.Lock()
	lr := r.runs[info.RunID]
	r.mu.Unlock()
	if lr == nil {
		// RunFinished without RunStarted: record the run span alone.
		lr = r.RunStarted(context.Background(), info).(*liveRun)
	}
	end := res.CompletedAt.UTC()
	if res.CompletedAt.IsZero() {
		end = r.opts.Now().UTC()
	}
	status := StatusOK
	switch res.Status {
	case runtime.StatusFailed:
		status = StatusError
	case runtime.StatusWaiting:
		status = StatusWaiting
	}
	lr.mu.Lock()
	st := lr.spans[SpanID(info.RunID, "")]
	sp := st.span
	sp.close(end, status)
	if res.ErrorCode != "" || res.ErrorMessage != "" {
		sp.Error = &SpanError{Code: res.ErrorCode, Message: res.ErrorMessage}
	}
	lr.setLocked(sp, false)
	// A parked run is also let go once written: its resume (maybe days later, maybe on another
	// replica) starts a fresh buffer and replays the checkpointed nodes as restored.
	lr.finished = true
	lr.mu.Unlock()
	if r.opts.Metrics != nil {
		r.opts.Metrics.runFinished(res.Status)
	}
	r.publish(info.RunID, StreamEvent{Type: EventSpanClose, Span: &sp})
	if status != StatusWaiting {
		r.publish(info.RunID, StreamEvent{Type: EventDone, Status: status})
	}
	r.signal()
}

// Emit turns one runtime event into span changes. It takes the run's lock briefly and never
// blocks on I/O: persistence is the background writer's job.
func (lr *liveRun) Emit(ev runtime.Event) {
	switch ev.Type {
	case runtime.EventNodeStarted, runtime.EventNodeFinished, runtime.EventNodeFailed, runtime.EventNodeSkipped:
	default:
		return // deltas and reasoning are the run stream's business
	}
	r := lr.r
	runID := lr.info.RunID
	if ev.RunID != "" {
		runID = ev.RunID
	}
	parent := SpanID(runID, ev.Parent)
	kind := KindNode
	if ev.Kind == runtime.KindIteration {
		kind = KindIteration
	}
	var pub [2]StreamEvent
	n := 0
	lr.mu.Lock()
	switch ev.Type {
	case runtime.EventNodeStarted:
		sp := Span{RunID: runID, SpanID: SpanID(runID, ev.NodeID), ParentID: parent, Name: spanName(ev), Kind: kind,
			NodeID: ev.NodeID, NodeKind: ev.Kind, Start: ev.Start.UTC(), Status: StatusRunning}
		lr.setLocked(sp, false)
		pub[n] = StreamEvent{Type: EventSpanOpen, Span: &sp}
		n++
		if ck := callKind(ev.Kind); ck != "" {
			call := Span{RunID: runID, SpanID: SpanID(runID, callKey(ev.NodeID)), ParentID: sp.SpanID, Name: callName(ck, runtime.Attribution{}),
				Kind: ck, NodeID: ev.NodeID, NodeKind: ev.Kind, Start: ev.Start.UTC(), Status: StatusRunning}
			lr.setLocked(call, false)
			pub[n] = StreamEvent{Type: EventSpanOpen, Span: &call}
			n++
		}
	case runtime.EventNodeSkipped:
		sp := Span{RunID: runID, SpanID: SpanID(runID, ev.NodeID), ParentID: parent, Name: spanName(ev), Kind: kind,
			NodeID: ev.NodeID, NodeKind: ev.Kind, Start: ev.End.UTC()}
		sp.close(ev.End.UTC(), StatusSkipped)
		lr.setLocked(sp, false)
		pub[n] = StreamEvent{Type: EventSpanClose, Span: &sp}
		n++
	default: // finished or failed
		id := SpanID(runID, ev.NodeID)
		sp := Span{RunID: runID, SpanID: id, ParentID: parent, Name: spanName(ev), Kind: kind, NodeID: ev.NodeID, NodeKind: ev.Kind, Start: ev.Start.UTC()}
		if prev := lr.spans[id]; prev != nil && !prev.span.Start.IsZero() && !ev.Restored {
			sp.Start = prev.span.Start
		}
		status := nodeStatus(ev)
		sp.close(ev.End.UTC(), status)
		sp.Attributes = attributesOf(ev.Attr)
		sp.Attributes.Restored = ev.Restored
		if ev.Error != nil {
			sp.Error = &SpanError{Code: ev.Error.Code, Message: ev.Error.Message}
		}
		lr.setLocked(sp, ev.Restored)
		pub[n] = StreamEvent{Type: EventSpanClose, Span: &sp}
		n++
		callID := SpanID(runID, callKey(ev.NodeID))
		if ck := callKind(ev.Kind); ck != "" && (lr.spans[callID] != nil || !ev.Restored) {
			// A restored node made no call in this process: no call span unless one was opened.
			call := Span{RunID: runID, SpanID: callID, ParentID: id, Name: callName(ck, ev.Attr), Kind: ck,
				NodeID: ev.NodeID, NodeKind: ev.Kind, Start: sp.Start, Attributes: callAttributes(ev.Attr), Error: sp.Error}
			call.close(ev.End.UTC(), status)
			lr.setLocked(call, ev.Restored)
			pub[n] = StreamEvent{Type: EventSpanClose, Span: &call}
			n++
		}
		if ev.Input != nil || ev.Output != nil {
			lr.io = append(lr.io, capturedIO{nodeID: ev.NodeID, input: ev.Input, output: ev.Output, at: ev.End.UTC(), restored: ev.Restored})
		}
	}
	busy := len(lr.dirty) >= flushBatch
	lr.mu.Unlock()

	if r.opts.Metrics != nil && (ev.Type == runtime.EventNodeFinished || ev.Type == runtime.EventNodeFailed) && !ev.Restored {
		r.opts.Metrics.nodeFinished(ev.Kind, nodeStatus(ev), ev.End.Sub(ev.Start))
	}
	for i := 0; i < n; i++ {
		r.publish(runID, pub[i])
	}
	if busy {
		r.signal()
	}
}

// setLocked stores a span's new state and marks it for the writer; lr.mu must be held.
func (lr *liveRun) setLocked(sp Span, restored bool) {
	if prev := lr.spans[sp.SpanID]; prev != nil && restored && !prev.restored {
		// A state produced here is already buffered; a checkpoint replay must not replace it.
		if prev.span.Status != StatusRunning && prev.span.Status != StatusWaiting {
			return
		}
		restored = false // replaces an open or waiting span of this process: write it as usual
	}
	lr.spans[sp.SpanID] = &spanState{span: sp, restored: restored}
	lr.dirty[sp.SpanID] = struct{}{}
}

func (r *Recorder) publish(runID string, ev StreamEvent) {
	if r.opts.Bus != nil {
		r.opts.Bus.Publish(TraceTopic(runID), ev)
	}
}

// signal wakes the writer without blocking.
func (r *Recorder) signal() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func nodeStatus(ev runtime.Event) string {
	switch {
	case ev.Type == runtime.EventNodeFailed, ev.Status == runtime.NodeFailed:
		return StatusError
	case ev.Status == runtime.StatusWaiting:
		return StatusWaiting
	case ev.Status == runtime.NodeSkipped:
		return StatusSkipped
	}
	return StatusOK
}

func spanName(ev runtime.Event) string {
	if ev.Kind == "" {
		return ev.NodeID
	}
	return ev.Kind + " " + ev.NodeID
}

// callKind is the kind of the call span a node kind gets, if any.
func callKind(nodeKind string) string {
	switch nodeKind {
	case graph.KindLLM:
		return KindModelCall
	case graph.KindTool:
		return KindToolCall
	}
	return ""
}

// callName follows the OpenTelemetry GenAI span names: "chat {model}", "execute_tool {name}".
func callName(kind string, a runtime.Attribution) string {
	if kind == KindModelCall {
		if a.Model == "" {
			return "chat"
		}
		return "chat " + a.Model
	}
	name := a.ToolName
	if name == "" {
		name = a.ToolHost
	}
	if name == "" {
		return "execute_tool"
	}
	return "execute_tool " + name
}

func attributesOf(a runtime.Attribution) Attributes {
	return Attributes{Model: a.Model, TokensIn: a.TokensIn, TokensOut: a.TokensOut, ToolType: a.ToolType, ToolHost: a.ToolHost,
		ToolName: a.ToolName, MCPServer: a.MCPServer, Connection: a.Connection, Agent: a.Agent, ContentHash: a.ContentHash,
		Iterations: a.Iterations}
}

// callAttributes keep what concerns the call itself (not the subgraph or iteration counts).
func callAttributes(a runtime.Attribution) Attributes {
	return Attributes{Model: a.Model, TokensIn: a.TokensIn, TokensOut: a.TokensOut, ToolType: a.ToolType, ToolHost: a.ToolHost,
		ToolName: a.ToolName, MCPServer: a.MCPServer, Connection: a.Connection}
}

// Start runs the background writer until Stop.
func (r *Recorder) Start(ctx context.Context) error {
	return r.writer.start(ctx, r.loop)
}

// Stop ends the writer and flushes what is left, within ctx.
func (r *Recorder) Stop(ctx context.Context) error {
	r.writer.stop()
	return r.Flush(ctx)
}

func (r *Recorder) loop(ctx context.Context) {
	t := time.NewTicker(r.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
		if err := r.Flush(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn().Err(err).Msg("trace writer: flush failed; will retry")
		}
	}
}

// Flush writes every buffered change of every live run now, in one transaction.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	runs := make([]*liveRun, 0, len(r.runs))
	for _, lr := range r.runs {
		runs = append(runs, lr)
	}
	r.mu.Unlock()
	return r.flush(ctx, runs)
}

// FlushRun writes the buffered changes of one run, if it is live in this process, so a read
// that follows sees everything recorded so far.
func (r *Recorder) FlushRun(ctx context.Context, runID string) error {
	r.mu.Lock()
	lr := r.runs[runID]
	r.mu.Unlock()
	if lr == nil {
		return nil
	}
	return r.flush(ctx, []*liveRun{lr})
}

// Live reports whether the run is being recorded in this process.
func (r *Recorder) Live(runID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[runID] != nil
}

// runBatch is what one flush takes from one run's buffer.
type runBatch struct {
	lr       *liveRun
	info     RunInfo
	spans    []spanState
	ios      []capturedIO
	rows     []ioRow
	finished bool
}

// flush takes the buffers of runs and writes them together: batching across runs makes the
// writer's cost per run a few rows in a shared transaction instead of a transaction each.
func (r *Recorder) flush(ctx context.Context, runs []*liveRun) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()

	batches := make([]*runBatch, 0, len(runs))
	for _, lr := range runs {
		lr.mu.Lock()
		b := &runBatch{lr: lr, info: lr.info, finished: lr.finished, ios: lr.io}
		if len(lr.dirty) > 0 {
			b.spans = make([]spanState, 0, len(lr.dirty))
			for id := range lr.dirty {
				b.spans = append(b.spans, *lr.spans[id])
			}
			clear(lr.dirty)
		}
		lr.io = nil
		lr.mu.Unlock()
		if len(b.spans) == 0 && len(b.ios) == 0 && lr.registered {
			if b.finished {
				r.forget(lr)
			}
			continue
		}
		batches = append(batches, b)
	}
	if len(batches) == 0 {
		return nil
	}
	// Policies are read once per agent per flush, and kept by each run after its first write.
	byAgent := map[string]Policy{}
	var err error
	for _, b := range batches {
		if b.lr.policy == nil {
			p, ok := byAgent[b.info.AgentID]
			if !ok {
				if p, err = r.policyFor(ctx, b.info.AgentID); err != nil {
					break
				}
				byAgent[b.info.AgentID] = p
			}
			b.lr.policy = &p
		}
		b.rows = r.ioRows(b.info.RunID, *b.lr.policy, b.ios)
	}
	if err == nil {
		err = r.store.write(ctx, batches)
	}
	if err != nil {
		for _, b := range batches {
			r.requeue(b, err)
		}
		return err
	}
	for _, b := range batches {
		lr := b.lr
		lr.registered, lr.failures = true, 0
		if r.opts.Exporter != nil {
			var out []Span
			for _, s := range b.spans {
				sp := s.span
				// Restored spans were exported by the process that ran them.
				if lr.exported[sp.SpanID] || !exportable(sp) || s.restored {
					continue
				}
				lr.exported[sp.SpanID] = true
				out = append(out, sp)
			}
			if len(out) > 0 {
				r.opts.Exporter.Export(ctx, b.info, out)
			}
		}
		if b.finished {
			r.forget(lr)
		}
	}
	return nil
}

// requeue puts a failed batch back for the next flush, unless a finished run has failed too
// often (then its unwritten spans are dropped with an error log).
func (r *Recorder) requeue(b *runBatch, err error) {
	lr := b.lr
	lr.failures++
	if lr.failures >= maxFlushFailures && b.finished {
		r.log.Error().Err(err).Str("run_id", b.info.RunID).Int("spans", len(b.spans)).Msg("trace writer: giving up on a finished run's spans")
		r.forget(lr)
		return
	}
	lr.mu.Lock()
	for _, s := range b.spans {
		if _, again := lr.dirty[s.span.SpanID]; !again {
			lr.dirty[s.span.SpanID] = struct{}{}
		}
	}
	lr.io = append(b.ios, lr.io...)
	lr.mu.Unlock()
}

// forget drops a finished run whose buffer is empty (a resume may have reopened it meanwhile).
func (r *Recorder) forget(lr *liveRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.finished && len(lr.dirty) == 0 && len(lr.io) == 0 && r.runs[lr.info.RunID] == lr {
		delete(r.runs, lr.info.RunID)
	}
}

// exportable: OpenTelemetry spans are immutable once ended, so only final states are exported.
func exportable(sp Span) bool {
	switch sp.Status {
	case StatusOK, StatusError, StatusSkipped:
		return true
	}
	return false
}

func (r *Recorder) policyFor(ctx context.Context, agentID string) (Policy, error) {
	if agentID == "" || r.opts.Policies == nil {
		return DefaultPolicy(), nil
	}
	// An unreadable policy is retried with the rest of the batch: guessing could either keep
	// payloads the agent forbids or report capture_off for a run that was meant to be captured.
	return r.opts.Policies.IOPolicy(ctx, agentID)
}

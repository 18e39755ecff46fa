package runs

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/httpx"
)

// Durable-mode defaults.
const (
	DefaultLease     = 30 * time.Second
	DefaultPoll      = time.Second
	DefaultMaxActive = 16
)

// DurableOptions are durable mode's collaborators and tuning. DB, Store and Executor are
// required. The executor's Deps.Agents should be SubgraphLoader(Agents) so that subgraph
// nodes resolve saved agents.
type DurableOptions struct {
	DB        *database.DB
	Store     *Store
	Executor  *runtime.Executor
	Agents    Agents
	Sessions  Sessions
	Observers []Observer
	// Enabled is SERVICE_DURABLE=1. Off: the endpoints answer durable_required and no worker runs.
	Enabled bool
	// Lease is how long a claim lasts without renewal (SERVICE_DURABLE_LEASE; default 30 s).
	Lease time.Duration
	// Heartbeat is how often a held lease is renewed (default Lease/3).
	Heartbeat time.Duration
	// Poll is how often the worker looks for claimable runs (default 1 s, and at most Lease/2).
	Poll time.Duration
	// MaxActive bounds the durable runs this process executes at once (default 16).
	MaxActive int
	// Owner names this process in lease_owner (default: host, pid and a random suffix).
	Owner  string
	Logger zerolog.Logger
	// Now is the clock of leases (default time.Now).
	Now func() time.Time
}

// Durable is durable mode: POST /agents/{id}/durable-runs, POST /runs/{id}/resume, and the
// worker that claims durable runs by lease and executes them over checkpoints.
type Durable struct {
	svc       *Service // reused for agent resolution, sessions and observers; never executes
	exec      *runtime.Executor
	leases    *leaseStore
	enabled   bool
	heartbeat time.Duration
	poll      time.Duration
	slots     chan struct{}
	kick      chan struct{}
	log       zerolog.Logger

	mu      sync.Mutex
	stop    context.CancelCauseFunc
	running sync.WaitGroup
}

// errStopping is the cause an execution is cancelled with when the process stops: its lease
// is released for another worker instead of the run being recorded failed.
var errStopping = errors.New("durable worker stopping")

// NewDurable builds durable mode.
func NewDurable(opts DurableOptions) (*Durable, error) {
	if opts.DB == nil || opts.Store == nil || opts.Executor == nil {
		return nil, errors.New("runs: durable mode needs DB, Store and Executor")
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Heartbeat <= 0 || opts.Heartbeat >= opts.Lease {
		opts.Heartbeat = opts.Lease / 3
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Poll > opts.Lease/2 {
		opts.Poll = opts.Lease / 2
	}
	if opts.MaxActive <= 0 {
		opts.MaxActive = DefaultMaxActive
	}
	if opts.Owner == "" {
		opts.Owner = newOwner()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	svc := &Service{store: opts.Store, exec: opts.Executor, agents: opts.Agents, sessions: opts.Sessions,
		observers: opts.Observers, durableMode: opts.Enabled, log: opts.Logger}
	return &Durable{
		svc: svc, exec: opts.Executor, enabled: opts.Enabled, heartbeat: opts.Heartbeat, poll: opts.Poll,
		leases: &leaseStore{db: opts.DB, owner: opts.Owner, ttl: opts.Lease, now: opts.Now},
		slots:  make(chan struct{}, opts.MaxActive), kick: make(chan struct{}, 1),
		log: opts.Logger.With().Str("module", "durable").Str("owner", opts.Owner).Logger(),
	}, nil
}

// newOwner names this process for leases: readable in the runs table, unique across restarts.
func newOwner() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Owner is this process's lease owner id.
func (d *Durable) Owner() string { return d.leases.owner }

// SubgraphLoader adapts the agents resolver to the graph runtime's subgraph loader: a pinned
// version or content hash, else the latest version at the time the subgraph node first runs
// (the runtime checkpoints what it resolved, so a resumed run keeps that version).
func SubgraphLoader(a Agents) runtime.SubgraphLoader { return agentGraphs{a} }

type agentGraphs struct{ a Agents }

func (g agentGraphs) Load(ctx context.Context, agent, version, contentHash string) (*graph.Graph, string, error) {
	if g.a == nil {
		return nil, "", apperr.ErrUnavailable.Msg("agents are not available")
	}
	av, err := g.a.Resolve(ctx, agent, version, contentHash)
	if err != nil {
		return nil, "", err
	}
	return av.Graph, av.ContentHash, nil
}

//go:embed durable_openapi.json
var durableOpenAPI []byte

// OpenAPI returns durable mode's OpenAPI fragment.
func (d *Durable) OpenAPI() []byte { return durableOpenAPI }

// Register mounts durable mode's routes.
func (d *Durable) Register(g *echo.Group) {
	g.POST("/agents/:id/durable-runs", d.startHandler)
	g.POST("/runs/:id/resume", d.resumeHandler)
}

func (d *Durable) required() error {
	return ErrDurableRequired.Msg("durable mode is off: start the control plane with SERVICE_DURABLE=1")
}

func (d *Durable) startHandler(c echo.Context) error {
	if !d.enabled {
		return d.required()
	}
	var req AgentRequest
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	if req.Stream != nil && *req.Stream {
		return invalid("stream", "must be false or absent: durable runs do not stream; poll GET /runs/{id}")
	}
	in, err := decodeInput(req.Input)
	if err != nil {
		return err
	}
	id, err := d.StartDurable(c.Request().Context(), AgentRunRequest{AgentID: c.Param("id"),
		Version: deref(req.Version), ContentHash: deref(req.ContentHash), Input: in, SessionID: deref(req.SessionID)})
	if err != nil {
		return err
	}
	c.Response().Header().Set("X-Run-Id", id)
	return c.JSON(http.StatusAccepted, map[string]string{"run_id": id})
}

// resumeRequest is the body of POST /runs/{id}/resume.
type resumeRequest struct {
	Input json.RawMessage `json:"input"`
}

func (d *Durable) resumeHandler(c echo.Context) error {
	if !d.enabled {
		return d.required()
	}
	var req resumeRequest
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	if len(req.Input) == 0 {
		return invalid("input", "is required: the human node's output (any JSON value)")
	}
	var in any
	if err := json.Unmarshal(req.Input, &in); err != nil {
		return invalid("input", "is not valid JSON")
	}
	if err := d.Resume(c.Request().Context(), c.Param("id"), in); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"run_id": c.Param("id"), "status": StatusStreaming})
}

// StartDurable records a durable run of a saved agent and returns its id at once; a worker
// (this process's or another replica's) claims and executes it. The run is pinned to the
// content hash resolved now, so every attempt executes the same version. Triggers route
// agents that need durable mode here.
func (d *Durable) StartDurable(ctx context.Context, req AgentRunRequest) (string, error) {
	if !d.enabled {
		return "", d.required()
	}
	av, err := d.svc.resolveAgent(ctx, req.AgentID, req.Version, req.ContentHash)
	if err != nil {
		return "", err
	}
	in := req.Input
	if in == nil {
		in = map[string]any{}
	}
	var sessionID string
	if req.SessionID != "" {
		p := &prepared{}
		if err := d.svc.checkSession(ctx, &req.SessionID, p); err != nil {
			return "", err
		}
		sessionID = p.sessionID
	}
	r, err := d.svc.store.Insert(ctx, NewRun{Kind: KindAgent, Input: in, AgentID: av.AgentID, Version: av.Version,
		ContentHash: av.ContentHash, TriggerID: req.TriggerID, SessionID: sessionID, Durable: true})
	if err != nil {
		return "", err
	}
	d.wake()
	return r.ID, nil
}

// Resume saves input as the output of the human node the run waits at and makes the run
// claimable again. A run not waiting (or a resume that lost a race) is 409 run_not_waiting.
func (d *Durable) Resume(ctx context.Context, runID string, input any) error {
	if !d.enabled {
		return d.required()
	}
	node, err := d.leases.resume(ctx, runID, input)
	if err != nil {
		return err
	}
	d.log.Info().Str("run_id", runID).Str("node", node).Msg("durable run resumed")
	d.wake()
	return nil
}

// wake makes the local worker poll now rather than at its next tick.
func (d *Durable) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Start runs the worker when durable mode is on (httpx.Starter).
func (d *Durable) Start(ctx context.Context) error {
	if !d.enabled {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stop != nil {
		return errors.New("durable worker already started")
	}
	wctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	d.stop = cancel
	d.running.Add(1)
	go func() {
		defer d.running.Done()
		d.loop(wctx)
	}()
	// ctx ending (process shutdown) stops the worker too.
	go func() {
		select {
		case <-ctx.Done():
			cancel(errStopping)
		case <-wctx.Done():
		}
	}()
	d.log.Info().Dur("lease", d.leases.ttl).Int("max_active", cap(d.slots)).Msg("durable worker started")
	return nil
}

// Stop cancels the executions in flight, releases their leases for other workers, and waits
// for them or for ctx (httpx.Starter).
func (d *Durable) Stop(ctx context.Context) error {
	d.mu.Lock()
	stop := d.stop
	d.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop(errStopping)
	done := make(chan struct{})
	go func() { d.running.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop polls for claimable runs until ctx ends.
func (d *Durable) loop(ctx context.Context) {
	t := time.NewTicker(d.poll)
	defer t.Stop()
	for {
		d.fill(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.kick:
		}
	}
}

// fill claims as many runs as there are free slots.
func (d *Durable) fill(ctx context.Context) {
	free := cap(d.slots) - len(d.slots)
	if free <= 0 || ctx.Err() != nil {
		return
	}
	// Ask for a few more than the free slots: other replicas may win some of the claims.
	ids, err := d.leases.claimable(ctx, free*2)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("listing claimable durable runs")
		}
		return
	}
	claimed := 0
	for _, id := range ids {
		select {
		case d.slots <- struct{}{}:
		default:
			return
		}
		until, won, err := d.leases.claim(ctx, id)
		if err != nil || !won {
			<-d.slots
			if err != nil && ctx.Err() == nil {
				d.log.Warn().Err(err).Str("run_id", id).Msg("claiming a durable run")
			}
			continue
		}
		claimed++
		d.running.Add(1)
		go func() {
			defer d.running.Done()
			defer func() { <-d.slots }()
			d.execute(ctx, id, until)
		}()
	}
	if claimed > 0 && len(ids) == free*2 {
		// More may be waiting than this round could see.
		d.wake()
	}
}

// execute runs one claimed durable run over its checkpoints until it completes, fails,
// parks, loses its lease, or the process stops.
func (d *Durable) execute(parent context.Context, id string, until time.Time) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	log := d.log.With().Str("run_id", id).Logger()
	hbDone := make(chan struct{})
	hbCtx, stopHB := context.WithCancel(ctx)
	go func() {
		defer close(hbDone)
		d.keepLease(hbCtx, id, until, cancel)
	}()
	endHB := func() { stopHB(); <-hbDone }
	defer endHB()

	wctx := context.WithoutCancel(ctx)
	r, err := d.svc.store.Get(ctx, id)
	if err != nil {
		log.Error().Err(err).Msg("loading a claimed durable run")
		endHB()
		_ = d.leases.release(wctx, id, d.leases.now().Add(d.leases.ttl))
		return
	}
	info := RunInfo{RunID: r.ID, AgentID: deref(r.AgentID), Version: deref(r.Version), ContentHash: deref(r.ContentHash),
		SessionID: deref(r.SessionID), TriggerID: deref(r.TriggerID), Kind: r.Kind, Durable: true, StartedAt: r.CreatedAt}
	var input any
	if err := json.Unmarshal(r.Input, &input); err != nil {
		input = nil
	}

	av, err := d.svc.resolveAgent(ctx, info.AgentID, "", info.ContentHash)
	if err != nil {
		if ctx.Err() != nil {
			d.abandon(wctx, id, context.Cause(ctx), log)
			return
		}
		ae := apperr.From(err)
		if ae == nil || ae.Status >= 500 {
			// An outage, not a bad pin: try again later rather than fail the run.
			log.Warn().Err(err).Msg("resolving a durable run's agent; releasing it for a later retry")
			endHB()
			_ = d.leases.release(wctx, id, d.leases.now().Add(d.leases.ttl))
			return
		}
		endHB()
		d.record(wctx, info, r, RunOutcome{Status: StatusFailed, ErrorCode: ae.Code, ErrorMessage: ae.Message}, log)
		return
	}

	sinks := make(fanout, 0, len(d.svc.observers))
	for _, o := range d.svc.observers {
		if sk := o.RunStarted(ctx, info); sk != nil {
			sinks = append(sinks, sk)
		}
	}
	store := &runCheckpoints{l: d.leases, runID: id, lost: func(err error) { cancel(err) }}
	res := d.exec.Run(ctx, runtime.Spec{RunID: id, Graph: av.Graph, ContentHash: av.ContentHash, Input: input, Store: store, Sink: sinks})
	endHB()

	if ctx.Err() != nil {
		// Stopping or lease lost: the run is not this execution's to end.
		d.abandon(wctx, id, context.Cause(ctx), log)
		return
	}
	var out RunOutcome
	switch res.Status {
	case runtime.StatusWaiting:
		ok, err := d.leases.park(wctx, id, res.AwaitingNode, res.Prompt, res.Note)
		if err != nil || !ok {
			log.Warn().Err(err).Msg("parking a durable run: lease lost")
			return
		}
		log.Info().Str("node", res.AwaitingNode).Msg("durable run waiting at a human node")
		for _, o := range d.svc.observers {
			o.RunFinished(wctx, info, RunOutcome{Status: StatusWaiting, Note: res.Note, CompletedAt: d.leases.stamp()})
		}
		return
	case runtime.StatusFailed:
		if errors.Is(res.Err, runtime.ErrCheckpoint) || errors.Is(res.Err, ErrLeaseLost) {
			// The database refused a checkpoint: retry the run from its checkpoints later
			// rather than failing it for an outage.
			log.Warn().Err(res.Err).Msg("durable run could not checkpoint; releasing it for a later retry")
			_ = d.leases.release(wctx, id, d.leases.now().Add(d.leases.ttl))
			return
		}
		ae := apperr.From(res.Err)
		if ae == nil {
			ae = apperr.ErrInternal
			log.Error().Err(res.Err).Msg("durable run failed without a named error")
		}
		out = RunOutcome{Status: StatusFailed, Note: res.Note, ErrorCode: ae.Code, ErrorMessage: ae.Message}
	default:
		out = RunOutcome{Status: StatusCompleted, Note: res.Note}
		if res.HasOutput {
			out.Output = res.Output
		}
	}
	d.record(wctx, info, r, out, log)
}

// record writes the end of a held run, appends the session turn and tells the observers.
func (d *Durable) record(ctx context.Context, info RunInfo, r *Run, out RunOutcome, log zerolog.Logger) {
	out.CompletedAt = d.leases.stamp()
	ok, err := d.leases.finish(ctx, info.RunID, out)
	if err != nil || !ok {
		log.Warn().Err(err).Msg("recording the end of a durable run: lease lost; another worker continues it")
		return
	}
	if out.Status == StatusCompleted && info.SessionID != "" && d.svc.sessions != nil {
		var in any
		_ = json.Unmarshal(r.Input, &in)
		user, assistant := textOf(in), textOf(out.Output)
		if strings.TrimSpace(user) != "" && strings.TrimSpace(assistant) != "" {
			if err := d.svc.sessions.Append(ctx, info.SessionID, user, assistant); err != nil {
				log.Warn().Err(err).Str("session_id", info.SessionID).Msg("appending the session turn")
			}
		}
	}
	for _, o := range d.svc.observers {
		o.RunFinished(ctx, info, out)
	}
	log.Info().Str("status", out.Status).Msg("durable run ended")
}

// abandon leaves a run this execution no longer holds (lease lost) or gives it back
// (stopping) so that another worker continues from its checkpoints at once.
func (d *Durable) abandon(ctx context.Context, id string, cause error, log zerolog.Logger) {
	if errors.Is(cause, errStopping) {
		if err := d.leases.release(ctx, id, time.Time{}); err != nil {
			log.Warn().Err(err).Msg("releasing a durable run's lease at stop")
		}
		log.Info().Msg("durable run released at stop; another worker continues it")
		return
	}
	log.Warn().Err(cause).Msg("durable run abandoned")
}

// keepLease renews the lease every heartbeat. When the lease is gone (another owner, or
// renewals failing until it expired) it cancels the execution with ErrLeaseLost, so a worker
// that cannot prove it still holds the run stops touching it.
func (d *Durable) keepLease(ctx context.Context, id string, until time.Time, cancel context.CancelCauseFunc) {
	t := time.NewTicker(d.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next, won, err := d.leases.renew(ctx, id)
		switch {
		case err == nil && won:
			until = next
		case err == nil:
			cancel(ErrLeaseLost.Msg("run %s: lease taken over or expired", id))
			return
		case ctx.Err() != nil:
			return
		case !d.leases.now().Before(until):
			cancel(ErrLeaseLost.Msg("run %s: lease expired while it could not be renewed", id).Wrap(err))
			return
		default:
			d.log.Warn().Err(err).Str("run_id", id).Msg("renewing a durable run's lease; retrying")
		}
	}
}

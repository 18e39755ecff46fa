// Package runs starts, streams and records runs: plain prompt runs through the inference
// plane, runs of inline graphs, and runs of saved agents (immediate, streamed or in the
// background for triggers). Every kind goes through the graph runtime's executor, so events,
// notes and traces are uniform; a prompt run is a synthesized one-llm-node graph.
package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/apperr"
)

// Observer sees every run (observability implements it): a sink for the run's events, and the end.
type Observer interface {
	RunStarted(ctx context.Context, info RunInfo) runtime.EventSink
	RunFinished(ctx context.Context, info RunInfo, res RunOutcome)
}

// RunInfo describes a run to observers. Kind is "prompt", "graph" or "agent".
type RunInfo struct {
	RunID, AgentID, Version, ContentHash, SessionID, TriggerID, Kind string
	Durable                                                          bool
	StartedAt                                                        time.Time
}

// RunOutcome is how a run ended, as recorded.
type RunOutcome struct {
	Status, Note, ErrorCode, ErrorMessage string
	Output                                any
	CompletedAt                           time.Time
}

// AgentVersion is a saved agent version resolved for a run.
type AgentVersion struct {
	AgentID     string
	Version     string
	ContentHash string
	Graph       *graph.Graph
}

// Agents resolves saved agents: by version, by content hash, or the latest when both are
// empty. Unknown agents, versions and hashes are 404 *apperr.Errors.
type Agents interface {
	Resolve(ctx context.Context, agentID, version, contentHash string) (AgentVersion, error)
}

// HistoryMessage is one earlier message of a session.
type HistoryMessage struct {
	Role    string
	Content string
}

// Sessions is the part of the sessions module runs use: existence, history and appending
// the finished turn. Unknown sessions are 404 *apperr.Errors.
type Sessions interface {
	Exists(ctx context.Context, id string) error
	History(ctx context.Context, id string) ([]HistoryMessage, error)
	Append(ctx context.Context, id, userContent, assistantContent string) error
}

// Models checks that a logical id is registered in the inference plane (404
// model_not_found otherwise); platform/client.Inference implements it.
type Models interface {
	Model(ctx context.Context, id string) error
}

// DurableStarter starts a durable run of an agent (durable mode implements it). When it is
// set, StartAgentRun hands it the agents that need durable mode instead of refusing them.
type DurableStarter interface {
	StartDurable(ctx context.Context, req AgentRunRequest) (runID string, err error)
}

// AgentRunRequest is a run of a saved agent started without a caller waiting on it
// (triggers). Input is the run input; Version or ContentHash pin the version.
type AgentRunRequest struct {
	AgentID, Version, ContentHash string
	Input                         any
	SessionID, TriggerID          string
}

// Options are the service's collaborators. Store and Executor are required; a missing
// Models, Agents or Sessions makes the runs that need it fail with a named error.
type Options struct {
	Store     *Store
	Executor  *runtime.Executor
	Models    Models
	Agents    Agents
	Sessions  Sessions
	Observers []Observer
	// DurableMode reports SERVICE_DURABLE=1; it changes only the message of durable_required
	// (durable runs have their own endpoint).
	DurableMode bool
	Durable     DurableStarter
	Logger      zerolog.Logger
	// Owner names this process in the lease_owner of its non-durable runs (default: host,
	// pid and a random suffix). Every replica needs its own.
	Owner string
	// Lease is how long a non-durable run stays this process's without renewal
	// (SERVICE_RUN_LEASE; default DefaultRunLease). The heartbeat renews every third of it;
	// the sweep fails runs whose lease expired, so a crashed replica's runs are failed
	// between one and two lease lengths after the crash.
	Lease time.Duration
	// Now is the clock of leases (default time.Now).
	Now func() time.Time
}

// DefaultRunLease is the default lease of a non-durable run.
const DefaultRunLease = 30 * time.Second

// Service runs runs.
type Service struct {
	store       *Store
	exec        *runtime.Executor
	models      Models
	agents      Agents
	sessions    Sessions
	observers   []Observer
	durableMode bool
	durable     DurableStarter
	log         zerolog.Logger

	// Non-durable runs carry this process's lease (owner, lease, now); inflight holds the
	// cancel function of each run this process executes, for the heartbeat to renew their
	// leases and to stop those another replica has declared abandoned.
	owner    string
	lease    time.Duration
	now      func() time.Time
	mu       sync.Mutex
	inflight map[string]context.CancelCauseFunc
	loop     *leaseLoop // the heartbeat and periodic sweep, once started

	// Background runs (triggers) run under bg; Stop cancels it and waits for them.
	bg       context.Context
	cancelBg context.CancelCauseFunc
	wg       sync.WaitGroup
}

// leaseLoop is the running heartbeat-and-sweep goroutine.
type leaseLoop struct {
	stop context.CancelFunc
	done chan struct{}
}

// NewService builds the service.
func NewService(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Executor == nil {
		return nil, errors.New("runs: Store and Executor are required")
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultRunLease
	}
	if opts.Owner == "" {
		opts.Owner = newOwner()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	bg, cancel := context.WithCancelCause(context.Background())
	return &Service{
		store: opts.Store, exec: opts.Executor, models: opts.Models, agents: opts.Agents,
		sessions: opts.Sessions, observers: opts.Observers, durableMode: opts.DurableMode,
		durable: opts.Durable, log: opts.Logger, bg: bg, cancelBg: cancel,
		owner: opts.Owner, lease: opts.Lease, now: opts.Now, inflight: map[string]context.CancelCauseFunc{},
	}, nil
}

// Owner is this process's lease owner id for non-durable runs.
func (s *Service) Owner() string { return s.owner }

// leaseUntil is when a lease taken or renewed now ends.
func (s *Service) leaseUntil() time.Time { return s.now().Add(s.lease) }

// Store returns the run records store.
func (s *Service) Store() *Store { return s.store }

// prepared is a validated run, ready to record and execute.
type prepared struct {
	kind        string
	graph       *graph.Graph
	hash        string // content hash: keys the executor's plan cache and is recorded
	execInput   any    // what the graph receives
	recordInput any    // what the record shows as input
	model       string
	agentID     string
	version     string
	sessionID   string
	triggerID   string
	answer      map[string]bool // llm nodes whose deltas are answer tokens
	promptText  string          // prompt runs: the user's message, for the session turn
}

// promptNode is the id of the synthesized llm node of a prompt run (delta frames name it).
const promptNode = "llm"

// PromptRequest is the body of POST /runs.
type PromptRequest struct {
	Input     *string         `json:"input"`
	Model     *string         `json:"model"`
	Params    json.RawMessage `json:"params"`
	Stream    *bool           `json:"stream"`
	SessionID *string         `json:"session_id"`
}

// GraphRequest is the body of POST /graphs/runs.
type GraphRequest struct {
	IR        json.RawMessage `json:"ir"`
	Input     json.RawMessage `json:"input"`
	Stream    *bool           `json:"stream"`
	SessionID *string         `json:"session_id"`
}

// AgentRequest is the body of POST /agents/{id}/runs and /agents/{id}/invoke.
type AgentRequest struct {
	Input       json.RawMessage `json:"input"`
	Version     *string         `json:"version"`
	ContentHash *string         `json:"content_hash"`
	SessionID   *string         `json:"session_id"`
	Stream      *bool           `json:"stream"`
}

// paramAliases accepts the wire (snake_case) spelling of llm params next to the IR's.
var paramAliases = map[string]string{
	"max_tokens": "maxTokens", "top_p": "topP", "top_k": "topK", "presence_penalty": "presencePenalty",
	"frequency_penalty": "frequencyPenalty", "reasoning_effort": "reasoningEffort", "min_p": "minP",
	"repeat_penalty": "repeatPenalty",
}

// preparePrompt validates a prompt run and synthesizes its graph: one llm node (the session's
// earlier turns as messages, then the input as the user message) feeding an output node that
// delivers the answer text.
func (s *Service) preparePrompt(ctx context.Context, req PromptRequest) (*prepared, error) {
	if req.Input == nil || strings.TrimSpace(*req.Input) == "" {
		return nil, invalid("input", "is required: a non-blank string (the prompt)")
	}
	if req.Model == nil || strings.TrimSpace(*req.Model) == "" {
		return nil, invalid("model", "is required: a logical id registered in the inference plane")
	}
	model := *req.Model
	var params map[string]any
	if p := strings.TrimSpace(string(req.Params)); p != "" && p != "null" {
		if err := json.Unmarshal(req.Params, &params); err != nil || params == nil {
			return nil, invalid("params", "must be a JSON object")
		}
		for k, v := range params {
			if alias, ok := paramAliases[k]; ok {
				if _, both := params[alias]; both {
					return nil, invalid("params", "sets both %s and %s", k, alias)
				}
				delete(params, k)
				params[alias] = v
			}
		}
	}
	var sessionID string
	var history []HistoryMessage
	if req.SessionID != nil {
		sessionID = *req.SessionID
		if s.sessions == nil {
			return nil, apperr.ErrUnavailable.Msg("sessions are not available")
		}
		h, err := s.sessions.History(ctx, sessionID)
		if err != nil {
			return nil, err
		}
		history = h
	}
	// Message contents travel in the input and are read back with exact single tokens, so
	// text that looks like a token ("$in.x") is never interpolated.
	hist := make([]any, len(history))
	msgs := make([]any, 0, len(history)+1)
	for i, m := range history {
		hist[i] = map[string]any{"role": m.Role, "content": m.Content}
		msgs = append(msgs, map[string]any{"role": m.Role, "content": fmt.Sprintf("$in.in.history[%d].content", i)})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "$in.in.prompt"})
	llm := map[string]any{"id": promptNode, "kind": graph.KindLLM, "model": model, "messages": msgs}
	if len(params) > 0 {
		llm["params"] = params
	}
	doc := map[string]any{
		"nodes": []any{llm, map[string]any{"id": "out", "kind": graph.KindOutput, "value": "$in.in.text"}},
		"edges": []any{map[string]any{"source": promptNode, "target": "out"}},
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, invalid("params", "is not serialisable")
	}
	g, problems := graph.Validate(raw)
	if len(problems) > 0 {
		// The only client-controlled parts are the model id and params: report those.
		msgs := make([]string, 0, len(problems))
		for _, p := range problems {
			msgs = append(msgs, strings.TrimPrefix(p.Path, "/nodes/0/")+": "+p.Message)
		}
		return nil, apperr.Invalid("%s", strings.Join(msgs, "; ")).WithDetails(map[string]any{"field": "params", "problems": problems})
	}
	if s.models == nil {
		return nil, apperr.ErrUnavailable.Msg("the inference plane is not configured")
	}
	if err := s.models.Model(ctx, model); err != nil {
		return nil, err
	}
	return &prepared{
		kind: KindPrompt, graph: g, execInput: map[string]any{"prompt": *req.Input, "history": hist},
		recordInput: *req.Input, model: model, sessionID: sessionID, answer: map[string]bool{promptNode: true},
		promptText: *req.Input,
	}, nil
}

// decodeInput parses a graph or agent run input: any JSON value, an empty object when omitted.
func decodeInput(raw json.RawMessage) (any, error) {
	if t := strings.TrimSpace(string(raw)); t == "" {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, invalid("input", "is not valid JSON")
	}
	return v, nil
}

// prepareGraph validates an inline IR; problems answer 400 invalid_ir before any run exists.
func (s *Service) prepareGraph(ctx context.Context, req GraphRequest) (*prepared, error) {
	ir := strings.TrimSpace(string(req.IR))
	if ir == "" || ir == "null" {
		return nil, runtime.ErrInvalidGraph.Msg("ir is required").WithDetails(map[string]any{"problems": graph.Problems{{Path: "", Message: "ir is required"}}})
	}
	g, problems := graph.Validate(req.IR)
	if len(problems) > 0 {
		msg := "the IR has 1 problem: " + problems[0].Message
		if len(problems) > 1 {
			msg = fmt.Sprintf("the IR has %d problems; the first: %s", len(problems), problems[0].Message)
		}
		return nil, runtime.ErrInvalidGraph.Msg("%s", msg).WithDetails(map[string]any{"problems": problems})
	}
	if runtime.RequiresDurable(g) {
		return nil, s.durableRequired("this graph holds a human, subgraph, loop or map node; such graphs run only as durable runs of a saved agent: publish it with POST /agents, then POST /agents/{id}/durable-runs")
	}
	hash, err := graph.ContentHash(req.IR)
	if err != nil {
		return nil, runtime.ErrInvalidGraph.Msg("the IR cannot be hashed: %v", err)
	}
	in, err := decodeInput(req.Input)
	if err != nil {
		return nil, err
	}
	p := &prepared{kind: KindGraph, graph: g, hash: hash, execInput: in, recordInput: in, answer: runtime.AnswerNodes(g)}
	if err := s.checkSession(ctx, req.SessionID, p); err != nil {
		return nil, err
	}
	return p, nil
}

func (s *Service) durableRequired(msg string) error {
	if !s.durableMode {
		msg += " (durable mode is off: start the control plane with SERVICE_DURABLE=1)"
	}
	return ErrDurableRequired.Msg("%s", msg)
}

func (s *Service) checkSession(ctx context.Context, id *string, p *prepared) error {
	if id == nil {
		return nil
	}
	if s.sessions == nil {
		return apperr.ErrUnavailable.Msg("sessions are not available")
	}
	if err := s.sessions.Exists(ctx, *id); err != nil {
		return err
	}
	p.sessionID = *id
	return nil
}

// resolveAgent finds the version a run pins. Both pins given must name the same version.
func (s *Service) resolveAgent(ctx context.Context, agentID, version, hash string) (AgentVersion, error) {
	if s.agents == nil {
		return AgentVersion{}, apperr.ErrUnavailable.Msg("agents are not available")
	}
	if hash != "" && !validHash(hash) {
		return AgentVersion{}, invalid("content_hash", "must be sha256: followed by 64 lowercase hex digits")
	}
	var av AgentVersion
	var err error
	if version != "" {
		av, err = s.agents.Resolve(ctx, agentID, version, "")
	} else {
		av, err = s.agents.Resolve(ctx, agentID, "", hash)
	}
	if err != nil {
		return AgentVersion{}, err
	}
	if version != "" && hash != "" && av.ContentHash != hash {
		return AgentVersion{}, apperr.Invalid("version %q has content_hash %s, not %s: pin one of them, or both in agreement", version, av.ContentHash, hash).
			WithDetails(map[string]any{"field": "content_hash", "version": version, "content_hash": av.ContentHash})
	}
	if av.Graph == nil {
		return AgentVersion{}, apperr.ErrInternal.Msg("agent version has no graph")
	}
	return av, nil
}

func validHash(h string) bool {
	if len(h) != len("sha256:")+64 || !strings.HasPrefix(h, "sha256:") {
		return false
	}
	for _, c := range h[len("sha256:"):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// prepareAgent resolves a saved agent for an immediate or streamed run.
func (s *Service) prepareAgent(ctx context.Context, agentID string, req AgentRequest) (*prepared, error) {
	av, err := s.resolveAgent(ctx, agentID, deref(req.Version), deref(req.ContentHash))
	if err != nil {
		return nil, err
	}
	if runtime.RequiresDurable(av.Graph) {
		return nil, s.durableRequired(fmt.Sprintf("agent %q holds a human, subgraph, loop or map node; run it with POST /agents/%s/durable-runs", agentID, agentID))
	}
	in, err := decodeInput(req.Input)
	if err != nil {
		return nil, err
	}
	p := &prepared{kind: KindAgent, graph: av.Graph, hash: av.ContentHash, execInput: in, recordInput: in,
		agentID: av.AgentID, version: av.Version, answer: runtime.AnswerNodes(av.Graph)}
	if err := s.checkSession(ctx, req.SessionID, p); err != nil {
		return nil, err
	}
	return p, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// begin records a run whose execution starts at once. It is inserted directly as streaming:
// created is the state of runs accepted for later execution (background and durable runs),
// and one write less per run matters on the hot path.
func (s *Service) begin(ctx context.Context, p *prepared) (*Run, error) {
	return s.store.Insert(ctx, NewRun{Kind: p.kind, Input: p.recordInput, Model: p.model, AgentID: p.agentID,
		Version: p.version, ContentHash: p.hash, TriggerID: p.triggerID, SessionID: p.sessionID, Status: StatusStreaming,
		LeaseOwner: s.owner, LeaseUntil: s.leaseUntil()})
}

// fanout hands each event to every sink; sinks never block (runtime.EventSink's contract).
type fanout []runtime.EventSink

func (f fanout) Emit(e runtime.Event) {
	for _, s := range f {
		s.Emit(e)
	}
}

// llmFailure remembers how the synthesized llm node of a prompt run failed: a prompt run
// whose model call failed has failed (a graph run would complete with a note instead).
type llmFailure struct {
	mu  sync.Mutex
	err *runtime.NodeError
}

func (l *llmFailure) Emit(e runtime.Event) {
	if e.NodeID == promptNode && e.Parent == "" && e.Error != nil &&
		(e.Type == runtime.EventNodeFailed || (e.Type == runtime.EventNodeFinished && e.Status == runtime.NodeFailed)) {
		l.mu.Lock()
		l.err = e.Error
		l.mu.Unlock()
	}
}

// execute runs a recorded run to its end, records the end, appends the session turn and
// tells the observers. extra receives the events too (the stream). When ctx is cancelled
// the run fails with context.Cause(ctx) if that is an *apperr.Error, else
// client_disconnected.
func (s *Service) execute(ctx context.Context, p *prepared, r *Run, extra runtime.EventSink) (RunOutcome, *apperr.Error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.track(r.ID, cancel)
	defer s.untrack(r.ID)
	info := RunInfo{RunID: r.ID, AgentID: p.agentID, Version: p.version, ContentHash: p.hash, SessionID: p.sessionID,
		TriggerID: p.triggerID, Kind: p.kind, StartedAt: r.CreatedAt}
	sinks := make(fanout, 0, len(s.observers)+2)
	for _, o := range s.observers {
		if sk := o.RunStarted(ctx, info); sk != nil {
			sinks = append(sinks, sk)
		}
	}
	if extra != nil {
		sinks = append(sinks, extra)
	}
	var lf *llmFailure
	if p.kind == KindPrompt {
		lf = &llmFailure{}
		sinks = append(sinks, lf)
	}
	res := s.exec.Run(ctx, runtime.Spec{RunID: r.ID, Graph: p.graph, ContentHash: p.hash, Input: p.execInput, Sink: sinks})

	out := RunOutcome{Status: res.Status, Note: res.Note}
	var failure *apperr.Error
	switch {
	case ctx.Err() != nil && res.Status != runtime.StatusCompleted:
		ae := apperr.From(context.Cause(ctx))
		if ae == nil {
			ae = ErrClientDisconnected
		}
		failure = ae
	case res.Status == runtime.StatusFailed:
		failure = apperr.From(res.Err)
		if failure == nil {
			failure = apperr.ErrInternal
			s.log.Error().Err(res.Err).Str("run_id", r.ID).Msg("run failed without a named error")
		}
	case res.Status == runtime.StatusWaiting:
		// Graphs that can park are refused before they start; reaching here is a bug.
		failure = apperr.ErrInternal.Msg("a non-durable run cannot wait")
	default:
		out.Status = StatusCompleted
		if res.HasOutput {
			out.Output = res.Output
		}
		if lf != nil {
			lf.mu.Lock()
			ne := lf.err
			lf.mu.Unlock()
			if ne != nil {
				status := ne.Status
				if status < 400 || status > 599 {
					status = http.StatusBadGateway
				}
				failure = apperr.New(status, ne.Code, ne.Message)
			}
		}
	}
	if failure != nil {
		out = RunOutcome{Status: StatusFailed, Note: res.Note, ErrorCode: failure.Code, ErrorMessage: failure.Message}
	}
	out.CompletedAt = s.store.stamp()

	// The caller may be gone; the record is still written.
	wctx := context.WithoutCancel(ctx)
	if _, err := s.store.Finish(wctx, r.ID, out); err != nil {
		s.log.Error().Err(err).Str("run_id", r.ID).Msg("recording the end of a run")
	}
	if out.Status == StatusCompleted && p.sessionID != "" && s.sessions != nil {
		user, assistant := p.promptText, textOf(out.Output)
		if p.kind != KindPrompt {
			user = textOf(p.recordInput)
		}
		if strings.TrimSpace(user) != "" && strings.TrimSpace(assistant) != "" {
			if err := s.sessions.Append(wctx, p.sessionID, user, assistant); err != nil {
				// The session may have been deleted while the run went on; the run stands.
				s.log.Warn().Err(err).Str("run_id", r.ID).Str("session_id", p.sessionID).Msg("appending the session turn")
			}
		}
	}
	for _, o := range s.observers {
		o.RunFinished(wctx, info, out)
	}
	return out, failure
}

// textOf is a value as turn text: strings as they are, anything else as compact JSON.
func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// StartAgentRun starts a run of a saved agent in the background (triggers) and returns its
// id at once; the run is recorded created, then streaming, then its end. Agents that need
// durable mode go to the DurableStarter when one is configured, else durable_required.
func (s *Service) StartAgentRun(ctx context.Context, req AgentRunRequest) (string, error) {
	av, err := s.resolveAgent(ctx, req.AgentID, req.Version, req.ContentHash)
	if err != nil {
		return "", err
	}
	if runtime.RequiresDurable(av.Graph) {
		if s.durable != nil && s.durableMode {
			return s.durable.StartDurable(ctx, req)
		}
		return "", s.durableRequired(fmt.Sprintf("agent %q holds a human, subgraph, loop or map node", req.AgentID))
	}
	in := req.Input
	if in == nil {
		in = map[string]any{}
	}
	p := &prepared{kind: KindAgent, graph: av.Graph, hash: av.ContentHash, execInput: in, recordInput: in,
		agentID: av.AgentID, version: av.Version, triggerID: req.TriggerID, answer: runtime.AnswerNodes(av.Graph)}
	if req.SessionID != "" {
		if err := s.checkSession(ctx, &req.SessionID, p); err != nil {
			return "", err
		}
	}
	if err := s.bg.Err(); err != nil {
		return "", apperr.ErrUnavailable.Msg("the control plane is shutting down")
	}
	r, err := s.store.Insert(ctx, NewRun{Kind: p.kind, Input: p.recordInput, AgentID: p.agentID,
		Version: p.version, ContentHash: p.hash, TriggerID: p.triggerID, SessionID: p.sessionID,
		LeaseOwner: s.owner, LeaseUntil: s.leaseUntil()})
	if err != nil {
		return "", err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.store.MarkStreaming(s.bg, r.ID); err != nil && s.bg.Err() == nil {
			s.log.Error().Err(err).Str("run_id", r.ID).Msg("marking a background run streaming")
		}
		s.execute(s.bg, p, r, nil)
	}()
	return r.ID, nil
}

// abandon records a run whose response could not be opened as failed.
func (s *Service) abandon(ctx context.Context, id string) {
	out := RunOutcome{Status: StatusFailed, ErrorCode: apperr.ErrInternal.Code, ErrorMessage: "the response stream could not be opened"}
	if _, err := s.store.Finish(context.WithoutCancel(ctx), id, out); err != nil {
		s.log.Error().Err(err).Str("run_id", id).Msg("recording an abandoned run")
	}
}

// track registers a run this process executes, for the heartbeat.
func (s *Service) track(id string, cancel context.CancelCauseFunc) {
	s.mu.Lock()
	if s.inflight == nil {
		s.inflight = map[string]context.CancelCauseFunc{}
	}
	s.inflight[id] = cancel
	s.mu.Unlock()
}

func (s *Service) untrack(id string) {
	s.mu.Lock()
	delete(s.inflight, id)
	s.mu.Unlock()
}

// Sweep fails the non-durable runs whose process is gone: their lease expired (or, for
// ownerless rows of an older version, they are older than a lease). Runs of live replicas,
// this one included, are left to finish.
func (s *Service) Sweep(ctx context.Context) (int64, error) {
	now := s.now()
	return s.store.Sweep(ctx, now, now.Add(-s.lease))
}

// Heartbeat renews the leases of every non-durable run this process executes, in one
// update. A run that is no longer this process's to record (another replica swept it after
// its lease expired, say while the database was unreachable) is cancelled, so its caller
// sees the interruption the record shows instead of a result that was never recorded.
func (s *Service) Heartbeat(ctx context.Context) error {
	s.mu.Lock()
	ids := make([]string, 0, len(s.inflight))
	for id := range s.inflight {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	n, err := s.store.RenewLeases(ctx, s.owner, s.leaseUntil())
	if err != nil || n >= int64(len(ids)) {
		return err
	}
	// Fewer renewed than in flight: some ended just now (normal), or were swept (lost).
	held, err := s.store.Held(ctx, s.owner, ids)
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(held))
	for _, id := range held {
		keep[id] = true
	}
	var lost []string
	s.mu.Lock()
	for _, id := range ids {
		if cancel, ok := s.inflight[id]; ok && !keep[id] {
			cancel(ErrInterrupted.Msg("%s", InterruptedMessage))
			lost = append(lost, id)
		}
	}
	s.mu.Unlock()
	for _, id := range lost {
		// A run that finished between the snapshot and the update lands here too; cancelling
		// it after its end is harmless, and its record is not touched.
		s.log.Debug().Str("run_id", id).Msg("run no longer held by this process; cancelled")
	}
	return nil
}

// startLeases starts the heartbeat (every third of the lease) and the periodic sweep (every
// lease) until Stop. It is idempotent.
func (s *Service) startLeases() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loop != nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	l := &leaseLoop{stop: stop, done: make(chan struct{})}
	s.loop = l
	go func() {
		defer close(l.done)
		beat := time.NewTicker(s.lease / 3)
		defer beat.Stop()
		sweep := time.NewTicker(s.lease)
		defer sweep.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-beat.C:
				if err := s.Heartbeat(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn().Err(err).Msg("renewing the leases of in-flight runs; retrying")
				}
			case <-sweep.C:
				n, err := s.Sweep(ctx)
				switch {
				case err != nil && ctx.Err() == nil:
					s.log.Warn().Err(err).Msg("sweeping runs of stopped replicas; retrying")
				case n > 0:
					s.log.Warn().Int64("runs", n).Msg("sweep: marked runs whose replica stopped renewing their lease as failed (interrupted)")
				}
			}
		}
	}()
}

// stopLeases ends the heartbeat and sweep loop, if it runs.
func (s *Service) stopLeases() {
	s.mu.Lock()
	l := s.loop
	s.loop = nil
	s.mu.Unlock()
	if l != nil {
		l.stop()
		<-l.done
	}
}

// Stop cancels background runs (they end failed, interrupted) and waits for them to be
// recorded, or for ctx to end.
func (s *Service) Stop(ctx context.Context) error {
	s.cancelBg(ErrInterrupted.Msg("interrupted: control-plane stopped while run was in-flight"))
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	// Leases are renewed while the runs still in flight are recorded; a process that stops
	// renewing has its remaining runs swept by another replica once their lease expires.
	defer s.stopLeases()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

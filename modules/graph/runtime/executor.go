package runtime

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/apperr"
)

// Executor runs graphs. It is safe for concurrent use; one Executor serves every run.
type Executor struct {
	deps  Deps
	http  *http.Client
	plans *planCache
	now   func() time.Time
}

// defaultMaxParallel is the per-run bound on concurrently executing nodes.
const defaultMaxParallel = 8

// New builds an executor from its collaborators.
func New(deps Deps) *Executor {
	if deps.MaxParallel <= 0 {
		deps.MaxParallel = defaultMaxParallel
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	hc := deps.HTTP
	if hc == nil {
		hc = &http.Client{}
	}
	return &Executor{deps: deps, http: hc, plans: newPlanCache(deps.PlanCacheSize), now: now}
}

// run is the state shared by every graph level of one Run call.
type run struct {
	e        *Executor
	id       string
	sink     EventSink
	store    NodeResultStore
	restored map[string]NodeResult
	sem      chan struct{}
}

// scope places a (nested) graph: prefix is prepended to node ids for events and store keys,
// parent is the enclosing iteration, element or subgraph node.
type scope struct {
	prefix string
	parent string
	depth  int
}

func (s scope) key(nodeID string) string { return s.prefix + nodeID }

// park is a human node waiting for input.
type park struct {
	node   string // namespaced id
	prompt string
}

// graphOutcome is how one graph level ended.
type graphOutcome struct {
	output    any
	hasOutput bool
	notes     []string
	park      *park
	err       error
}

// outcome is how one node execution ended.
type outcome struct {
	res      NodeResult
	isOutput bool // an output node executed: res.Value is the graph's output
	park     *park
	err      error // run-failing
	attr     Attribution
}

// completion is what a node goroutine reports to its graph's coordinator.
type completion struct {
	idx int
	out outcome
}

// Run executes spec.Graph on spec.Input. It never panics on bad graphs or inputs: faults end
// the run failed with a named code, or completed with a note, as IR.md and SPEC.md describe.
func (e *Executor) Run(ctx context.Context, spec Spec) Result {
	if spec.Graph == nil {
		return Result{Status: StatusFailed, Err: ErrInvalidGraph.Msg("no graph")}
	}
	p, err := e.plans.get(spec.Graph, spec.ContentHash)
	if err != nil {
		return Result{Status: StatusFailed, Err: err}
	}
	r := &run{e: e, id: spec.RunID, sink: spec.Sink, store: spec.Store, sem: make(chan struct{}, e.deps.MaxParallel)}
	if r.sink == nil {
		r.sink = discardSink{}
	}
	if spec.Store != nil {
		restored, err := spec.Store.Load(ctx)
		if err != nil {
			return Result{Status: StatusFailed, Err: ErrCheckpoint.Msg("node results could not be loaded").Wrap(err)}
		}
		r.restored = restored
	}
	g := r.runGraph(ctx, p, spec.Input, scope{})
	switch {
	case g.err != nil:
		return Result{Status: StatusFailed, Err: g.err, Note: joinNotes(g.notes)}
	case g.park != nil:
		return Result{Status: StatusWaiting, AwaitingNode: g.park.node, Prompt: g.park.prompt, Note: joinNotes(g.notes)}
	}
	notes := g.notes
	if !g.hasOutput {
		notes = append(notes, "graph ended without reaching an output node")
	}
	return Result{Status: StatusCompleted, Output: g.output, HasOutput: g.hasOutput, Note: joinNotes(notes)}
}

func joinNotes(notes []string) string { return strings.Join(notes, "; ") }

type discardSink struct{}

func (discardSink) Emit(Event) {}

// nodeState is the coordinator's bookkeeping for one node.
type nodeState struct {
	pending int            // incoming edges not yet settled
	live    bool           // some settled incoming edge carried a value
	inputs  map[string]any // port → value
	from    map[string]int // port → index of the edge that supplied the value
}

// indexedNote keeps notes in node order, independent of completion order.
type indexedNote struct {
	idx  int
	text string
}

// runGraph executes one graph level. A single coordinator (this goroutine) owns all node
// state; node goroutines only report completions, so no locks guard the state.
func (r *run) runGraph(parent context.Context, p *plan, input any, sc scope) graphOutcome {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	st := make([]nodeState, len(p.nodes))
	for i := range st {
		st[i].pending = len(p.inEdges[i])
	}
	done := make(chan completion, len(p.nodes))
	var (
		ready   []int
		running int
		fatal   error
		notes   []indexedNote
		out     graphOutcome
		outputs int
		parkIdx = -1
	)

	var settle func(i int, ports map[string]any)
	skip := func(i int) {
		now := r.e.now()
		r.sink.Emit(Event{Type: EventNodeSkipped, RunID: r.id, NodeID: sc.key(p.nodes[i].node.ID), Kind: p.nodes[i].node.Kind, Parent: sc.parent, End: now})
		settle(i, nil)
	}
	// settle delivers a node's live ports along its edges and readies or skips the targets.
	settle = func(i int, ports map[string]any) {
		for _, ei := range p.outEdges[i] {
			e := p.g.Edges[ei]
			t := p.index[e.Target]
			ts := &st[t]
			if v, live := ports[e.From()]; live {
				port := e.To()
				// Several live edges into one port: the edge declared first wins, so the
				// result does not depend on which branch finished first.
				if prev, ok := ts.from[port]; !ok || ei < prev {
					if ts.inputs == nil {
						ts.inputs = make(map[string]any, 2)
						ts.from = make(map[string]int, 2)
					}
					ts.inputs[port] = v
					ts.from[port] = ei
				}
				ts.live = true
			}
			ts.pending--
			if ts.pending == 0 {
				if ts.live {
					ready = append(ready, t)
				} else {
					skip(t)
				}
			}
		}
	}

	for _, i := range p.entries {
		st[i].inputs = map[string]any{graph.PortIn: input}
		st[i].live = true
		ready = append(ready, i)
	}

	for {
		for len(ready) > 0 && fatal == nil {
			i := ready[0]
			ready = ready[1:]
			running++
			// A lone ready node with nothing else running runs inline: a chain of nodes
			// then costs no goroutine hand-offs. done is buffered for every node, so the
			// inline send cannot block.
			r.launch(ctx, p.nodes[i], st[i].inputs, sc, done, len(ready) == 0 && running == 1)
		}
		if running == 0 {
			break
		}
		c := <-done
		running--
		i := c.idx
		o := c.out
		if o.err != nil {
			if fatal == nil || isCancel(fatal) && !isCancel(o.err) {
				fatal = o.err
			}
			cancel()
			continue
		}
		if fatal != nil {
			continue
		}
		if o.park != nil {
			// Downstream stays pending; other branches go on. The first parked node in
			// graph order is the one reported.
			if parkIdx < 0 || i < parkIdx {
				parkIdx, out.park = i, o.park
			}
			continue
		}
		if o.res.Note != "" {
			notes = append(notes, indexedNote{i, o.res.Note})
		}
		if o.isOutput {
			outputs++
			if outputs > 1 {
				fatal = ErrAmbiguousOutput.Msg("output node %q executed after another output node", sc.key(p.nodes[i].node.ID)).
					WithDetails(map[string]any{"node": sc.key(p.nodes[i].node.ID)})
				cancel()
				continue
			}
			out.output, out.hasOutput = o.res.Value, true
		}
		settle(i, o.res.Ports)
	}

	sort.SliceStable(notes, func(a, b int) bool { return notes[a].idx < notes[b].idx })
	for _, n := range notes {
		out.notes = append(out.notes, n.text)
	}
	if fatal == nil && parent.Err() != nil {
		fatal = ErrCanceled.Wrap(parent.Err())
	}
	if fatal != nil {
		out.err, out.park = fatal, nil
	}
	return out
}

func isCancel(err error) bool {
	return errors.Is(err, ErrCanceled) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// compositeKinds coordinate bodies instead of doing work themselves, so they do not hold one
// of the run's execution slots (their body nodes take slots; holding one here could deadlock).
func isComposite(kind string) bool {
	switch kind {
	case graph.KindLoop, graph.KindMap, graph.KindSubgraph, graph.KindHuman, graph.KindOutput:
		return true
	}
	return false
}

// launch starts one node: restored from the store, or executed under the run's bound.
func (r *run) launch(ctx context.Context, pn *pnode, inputs map[string]any, sc scope, done chan<- completion, inline bool) {
	key := sc.key(pn.node.ID)
	if res, ok := r.restored[key]; ok {
		// Restored synchronously: nothing runs, so nothing needs a goroutine or a slot.
		now := r.e.now()
		r.sink.Emit(Event{Type: EventNodeFinished, RunID: r.id, NodeID: key, Kind: pn.node.Kind, Parent: sc.parent,
			Start: now, End: now, Input: inputs, Output: res.Ports, Status: res.Status, Error: res.Error, Restored: true})
		done <- completion{idx: pn.idx, out: outcome{res: res, isOutput: pn.node.Kind == graph.KindOutput}}
		return
	}
	work := func() {
		if !isComposite(pn.node.Kind) {
			select {
			case r.sem <- struct{}{}:
				defer func() { <-r.sem }()
			case <-ctx.Done():
				done <- completion{idx: pn.idx, out: outcome{err: ErrCanceled.Wrap(ctx.Err())}}
				return
			}
		}
		start := r.e.now()
		r.sink.Emit(Event{Type: EventNodeStarted, RunID: r.id, NodeID: key, Kind: pn.node.Kind, Parent: sc.parent, Start: start})
		o := r.exec(ctx, pn, inputs, sc)
		if o.err != nil && ctx.Err() != nil && !isCancel(o.err) {
			// The failure is a consequence of cancellation; report it as such.
			o.err = ErrCanceled.Wrap(ctx.Err())
		}
		end := r.e.now()
		ev := Event{RunID: r.id, NodeID: key, Kind: pn.node.Kind, Parent: sc.parent, Start: start, End: end, Input: inputs, Attr: o.attr}
		switch {
		case o.err != nil:
			ev.Type, ev.Status, ev.Error = EventNodeFailed, NodeFailed, nodeErrorOf(o.err)
		case o.park != nil:
			ev.Type, ev.Status = EventNodeFinished, StatusWaiting
		default:
			ev.Type, ev.Status, ev.Output, ev.Error = EventNodeFinished, o.res.Status, o.res.Ports, o.res.Error
			if o.isOutput {
				ev.Output = map[string]any{"value": o.res.Value}
			}
		}
		if o.err == nil && o.park == nil && r.store != nil {
			// A finished node is worth keeping even when the run is being cancelled.
			if err := r.store.Save(context.WithoutCancel(ctx), key, o.res); err != nil {
				o = outcome{err: ErrCheckpoint.WithDetails(map[string]any{"node": key}).Wrap(err)}
				ev.Type, ev.Status, ev.Error = EventNodeFailed, NodeFailed, nodeErrorOf(o.err)
			}
		}
		r.sink.Emit(ev)
		done <- completion{idx: pn.idx, out: o}
	}
	if inline {
		work()
		return
	}
	go work()
}

// nodeErrorOf turns a run-failing error into the structured form events carry.
func nodeErrorOf(err error) *NodeError {
	if ae := apperr.From(err); ae != nil {
		return &NodeError{Code: ae.Code, Message: ae.Message}
	}
	return &NodeError{Code: "internal", Message: "node failed"}
}

// exec dispatches on the node kind.
func (r *run) exec(ctx context.Context, pn *pnode, inputs map[string]any, sc scope) outcome {
	switch pn.node.Kind {
	case graph.KindTransform:
		return r.execTransform(pn, inputs, sc)
	case graph.KindRouter:
		return r.execRouter(pn, inputs, sc)
	case graph.KindGuardrail:
		return r.execGuardrail(pn, inputs, sc)
	case graph.KindOutput:
		return r.execOutput(pn, inputs, sc)
	case graph.KindHuman:
		return r.execHuman(pn, inputs, sc)
	case graph.KindTool:
		return r.execTool(ctx, pn, inputs, sc)
	case graph.KindLLM:
		return r.execLLM(ctx, pn, inputs, sc)
	case graph.KindLoop:
		return r.execLoop(ctx, pn, inputs, sc)
	case graph.KindMap:
		return r.execMap(ctx, pn, inputs, sc)
	case graph.KindSubgraph:
		return r.execSubgraph(ctx, pn, inputs, sc)
	}
	return outcome{err: ErrInvalidGraph.Msg("node %q has unknown kind %q", sc.key(pn.node.ID), pn.node.Kind).
		WithDetails(map[string]any{"node": sc.key(pn.node.ID)})}
}

// ok is a successful outcome with one live port.
func ok(port string, v any) outcome {
	return outcome{res: NodeResult{Status: NodeOK, Ports: map[string]any{port: v}}}
}

package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/svc-dev/svc/modules/graph"
)

// Composite limits.
const (
	// maxLoopIterations caps maxIterations whatever the graph asks for.
	maxLoopIterations = 10_000
	// defaultMapConcurrency is a map node's element concurrency when it sets none.
	defaultMapConcurrency = 4
	// maxNesting bounds nested graph levels (bodies and subgraphs), so an agent that includes
	// itself fails instead of recursing forever.
	maxNesting = 32
)

// nested returns the scope of a body run under the composite node keyed key.
func (sc scope) nested(key string) scope {
	return scope{prefix: key + "/", parent: key, depth: sc.depth + 1}
}

// iteration runs one body execution (a loop iteration or a map element) keyed itKey, or
// restores its checkpointed result. It emits the iteration's own started/finished events.
func (r *run) iteration(ctx context.Context, body *plan, input any, itKey, parent string, sc scope) graphOutcome {
	if res, ok := r.restored[itKey]; ok {
		now := r.e.now()
		r.sink.Emit(Event{Type: EventNodeFinished, RunID: r.id, NodeID: itKey, Kind: KindIteration, Parent: parent, Start: now, End: now,
			Status: res.Status, Output: map[string]any{"value": res.Value}, Restored: true})
		var notes []string
		if res.Note != "" {
			notes = strings.Split(res.Note, "; ")
		}
		return graphOutcome{output: res.Value, hasOutput: true, notes: notes}
	}
	start := r.e.now()
	r.sink.Emit(Event{Type: EventNodeStarted, RunID: r.id, NodeID: itKey, Kind: KindIteration, Parent: parent, Start: start})
	g := r.runGraph(ctx, body, input, scope{prefix: itKey + "/", parent: itKey, depth: sc.depth + 1})
	ev := Event{RunID: r.id, NodeID: itKey, Kind: KindIteration, Parent: parent, Start: start, End: r.e.now(), Input: map[string]any{graph.PortIn: input}}
	switch {
	case g.err != nil:
		ev.Type, ev.Status, ev.Error = EventNodeFailed, NodeFailed, nodeErrorOf(g.err)
	case g.park != nil:
		ev.Type, ev.Status = EventNodeFinished, StatusWaiting
	default:
		if !g.hasOutput {
			g.notes = append(g.notes, fmt.Sprintf("body run %q reached no output node", itKey))
		}
		g.hasOutput = true
		ev.Type, ev.Status, ev.Output = EventNodeFinished, NodeOK, map[string]any{"value": g.output}
		if r.store != nil {
			res := NodeResult{Status: NodeOK, Value: g.output, Note: joinNotes(g.notes)}
			if err := r.store.Save(context.WithoutCancel(ctx), itKey, res); err != nil {
				g.err = ErrCheckpoint.WithDetails(map[string]any{"node": itKey}).Wrap(err)
				ev.Type, ev.Status, ev.Error = EventNodeFailed, NodeFailed, nodeErrorOf(g.err)
			}
		}
	}
	r.sink.Emit(ev)
	return g
}

// execLoop repeats the body, feeding each iteration's output back as the next input, until
// `until` (over $in.in = the iteration's output) holds or maxIterations is reached; at the
// limit the loop's output is the last iteration's and the run notes it.
func (r *run) execLoop(ctx context.Context, pn *pnode, inputs map[string]any, sc scope) outcome {
	n := pn.node
	key := sc.key(n.ID)
	if pn.bodyErr != nil {
		return outcome{err: ErrInvalidGraph.Msg("node %q: %v", key, pn.bodyErr).WithDetails(map[string]any{"node": key})}
	}
	if pn.untilErr != nil {
		return outcome{err: exprError(ErrTransform, key, "until", pn.untilErr)}
	}
	if sc.depth >= maxNesting {
		return outcome{err: ErrInvalidGraph.Msg("node %q: graphs nest deeper than %d levels", key, maxNesting).WithDetails(map[string]any{"node": key})}
	}
	limit := n.MaxIterations
	if limit <= 0 || limit > maxLoopIterations {
		return outcome{err: ErrInvalidGraph.Msg("node %q: maxIterations must be between 1 and %d", key, maxLoopIterations).WithDetails(map[string]any{"node": key})}
	}
	cur := inputs[graph.PortIn]
	var notes []string
	for i := 0; i < limit; i++ {
		itKey := fmt.Sprintf("%s/%d", key, i)
		g := r.iteration(ctx, pn.body, cur, itKey, key, sc)
		if g.err != nil {
			return outcome{err: g.err}
		}
		if g.park != nil {
			return outcome{park: g.park}
		}
		notes = append(notes, g.notes...)
		cur = g.output
		if pn.until != nil {
			v, err := runExpr(pn.until, map[string]any{graph.PortIn: cur})
			if err != nil {
				return outcome{err: exprError(ErrTransform, key, "until", err)}
			}
			done, isBool := v.(bool)
			if !isBool {
				return outcome{err: ErrTransform.Msg("node %q: until gave a %s, not a boolean", key, jsonKind(v)).WithDetails(map[string]any{"node": key, "field": "until"})}
			}
			if done {
				o := ok(graph.PortOut, cur)
				o.res.Note, o.attr = joinNotes(notes), Attribution{Iterations: i + 1}
				return o
			}
		}
	}
	if pn.until != nil {
		notes = append(notes, fmt.Sprintf("loop %q reached maxIterations (%d) before until held; its output is the last iteration's", key, limit))
	}
	o := ok(graph.PortOut, cur)
	o.res.Note, o.attr = joinNotes(notes), Attribution{Iterations: limit}
	return o
}

// execMap runs the body once per element of the list `over` names, with bounded concurrency;
// the output is the list of results in input order. Elements are checkpointed one by one.
func (r *run) execMap(ctx context.Context, pn *pnode, inputs map[string]any, sc scope) outcome {
	n := pn.node
	key := sc.key(n.ID)
	if pn.bodyErr != nil {
		return outcome{err: ErrInvalidGraph.Msg("node %q: %v", key, pn.bodyErr).WithDetails(map[string]any{"node": key})}
	}
	if pn.overErr != nil {
		return outcome{err: templateError(key, "over", pn.overErr)}
	}
	if sc.depth >= maxNesting {
		return outcome{err: ErrInvalidGraph.Msg("node %q: graphs nest deeper than %d levels", key, maxNesting).WithDetails(map[string]any{"node": key})}
	}
	v, err := graph.Resolve(*pn.overTok, inputs)
	if err != nil {
		return outcome{err: templateError(key, "over", err)}
	}
	items, isList := v.([]any)
	if !isList {
		return outcome{err: ErrTemplate.Msg("node %q, over: %s names a %s, not a list", key, pn.overTok.Raw, jsonKind(v)).
			WithDetails(map[string]any{"node": key, "field": "over", "token": pn.overTok.Raw})}
	}
	conc := n.Concurrency
	if conc <= 0 {
		conc = defaultMapConcurrency
	}
	conc = min(conc, max(len(items), 1))

	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]graphOutcome, len(items))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				g := r.iteration(mctx, pn.body, items[i], fmt.Sprintf("%s[%d]", key, i), key, sc)
				if g.err != nil {
					cancel() // one failed element fails the map; stop the others
				}
				results[i] = g
			}
		}()
	}
feed:
	for i := range items {
		select {
		case next <- i:
		case <-mctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()

	var (
		firstErr error
		firstPk  *park
		notes    []string
	)
	out := make([]any, len(items))
	for i, g := range results {
		switch {
		case g.err != nil:
			// Prefer the element's own failure over the cancellations it caused.
			if firstErr == nil || isCancel(firstErr) && !isCancel(g.err) {
				firstErr = g.err
			}
		case g.park != nil:
			if firstPk == nil {
				firstPk = g.park
			}
		}
		out[i] = g.output
		notes = append(notes, g.notes...)
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ErrCanceled.Wrap(ctx.Err())
	}
	if firstErr != nil {
		return outcome{err: firstErr}
	}
	if firstPk != nil {
		return outcome{park: firstPk}
	}
	o := ok(graph.PortOut, out)
	o.res.Note, o.attr = joinNotes(notes), Attribution{Iterations: len(items)}
	return o
}

// pinSuffix keys the checkpoint recording which content hash a subgraph node resolved to, so
// a resumed run keeps running the version it started with even if the agent moved on.
const pinSuffix = "#pin"

// execSubgraph runs a saved agent as a child graph on $in.in; its output leaves on out.
func (r *run) execSubgraph(ctx context.Context, pn *pnode, inputs map[string]any, sc scope) outcome {
	n := pn.node
	key := sc.key(n.ID)
	attr := Attribution{Agent: n.Agent}
	fail := func(format string, args ...any) outcome {
		return outcome{attr: attr, err: ErrSubgraph.Msg("node %q: "+format, append([]any{key}, args...)...).
			WithDetails(map[string]any{"node": key, "agent": n.Agent})}
	}
	if r.e.deps.Agents == nil {
		return fail("no agent loader configured")
	}
	if sc.depth >= maxNesting {
		return fail("graphs nest deeper than %d levels (does the agent include itself?)", maxNesting)
	}
	version, hash := n.Version, n.ContentHash
	pinned := false
	if res, found := r.restored[key+pinSuffix]; found {
		if h, isStr := res.Value.(string); isStr && h != "" {
			version, hash, pinned = "", h, true
		}
	}
	g, loadedHash, err := r.e.deps.Agents.Load(ctx, n.Agent, version, hash)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{err: ErrCanceled.Wrap(ctx.Err())}
		}
		return outcome{attr: attr, err: ErrSubgraph.Msg("node %q: agent %q could not be loaded", key, n.Agent).
			WithDetails(map[string]any{"node": key, "agent": n.Agent, "version": n.Version, "contentHash": n.ContentHash}).Wrap(err)}
	}
	if g == nil {
		return fail("agent %q loaded without a graph", n.Agent)
	}
	attr.ContentHash = loadedHash
	if r.store != nil && !pinned {
		if err := r.store.Save(context.WithoutCancel(ctx), key+pinSuffix, NodeResult{Status: NodeOK, Value: loadedHash}); err != nil {
			return outcome{attr: attr, err: ErrCheckpoint.WithDetails(map[string]any{"node": key}).Wrap(err)}
		}
	}
	p, err := r.e.plans.get(g, loadedHash)
	if err != nil {
		return outcome{attr: attr, err: err}
	}
	child := r.runGraph(ctx, p, inputs[graph.PortIn], sc.nested(key))
	if child.err != nil {
		return outcome{attr: attr, err: child.err}
	}
	if child.park != nil {
		return outcome{attr: attr, park: child.park}
	}
	notes := child.notes
	if !child.hasOutput {
		notes = append(notes, fmt.Sprintf("subgraph %q (agent %q) reached no output node", key, n.Agent))
	}
	o := ok(graph.PortOut, child.output)
	o.res.Note, o.attr = joinNotes(notes), attr
	return o
}

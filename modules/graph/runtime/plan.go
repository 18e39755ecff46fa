package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"

	"github.com/expr-lang/expr/vm"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/svc-dev/svc/modules/graph"
)

// plan is a graph compiled for execution: adjacency, compiled expressions, regexps and
// schemas. Plans are immutable once built and shared by concurrent runs.
type plan struct {
	g        *graph.Graph
	nodes    []*pnode
	index    map[string]int
	inEdges  [][]int // per node: indexes into g.Edges targeting it
	outEdges [][]int // per node: indexes into g.Edges leaving it
	entries  []int   // nodes without incoming edges
}

// pnode is one compiled node. Compile errors are kept and reported when the node executes,
// so a broken node on a dead branch does not fail a run that never reaches it.
type pnode struct {
	idx  int
	node *graph.Node

	prog    *vm.Program // transform expr, router select expression, guardrail check
	progErr error
	selTok  *graph.Token // router select when it is exactly one token

	until    *vm.Program // loop
	untilErr error

	checks    []compiledCheck // guardrail built-ins
	checksErr error

	body    *plan // loop and map
	bodyErr error

	overTok *graph.Token // map
	overErr error

	// wired holds the output ports with at least one outgoing edge.
	wired map[string]bool
}

// compiledCheck is a guardrail built-in with its regexps and schema ready.
type compiledCheck struct {
	spec    graph.GuardrailCheck
	field   *graph.Token
	regexps []*regexp.Regexp
	schema  *jsonschema.Schema
}

// compile builds a plan. Structural faults (duplicate ids, dangling edges, cycles) make the
// graph non-executable and are reported as invalid_ir.
func compile(g *graph.Graph, depth int) (*plan, error) {
	if depth > graph.MaxBodyNesting {
		return nil, ErrInvalidGraph.Msg("bodies nest deeper than %d levels", graph.MaxBodyNesting)
	}
	p := &plan{g: g, index: make(map[string]int, len(g.Nodes))}
	p.nodes = make([]*pnode, len(g.Nodes))
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if n.ID == "" {
			return nil, ErrInvalidGraph.Msg("node %d has no id", i)
		}
		if _, dup := p.index[n.ID]; dup {
			return nil, ErrInvalidGraph.Msg("duplicate node id %q", n.ID).WithDetails(map[string]any{"node": n.ID})
		}
		p.index[n.ID] = i
		p.nodes[i] = &pnode{idx: i, node: n, wired: map[string]bool{}}
	}
	p.inEdges = make([][]int, len(g.Nodes))
	p.outEdges = make([][]int, len(g.Nodes))
	for ei, e := range g.Edges {
		s, ok := p.index[e.Source]
		if !ok {
			return nil, ErrInvalidGraph.Msg("edge %d: unknown source %q", ei, e.Source)
		}
		t, ok := p.index[e.Target]
		if !ok {
			return nil, ErrInvalidGraph.Msg("edge %d: unknown target %q", ei, e.Target)
		}
		p.outEdges[s] = append(p.outEdges[s], ei)
		p.inEdges[t] = append(p.inEdges[t], ei)
		p.nodes[s].wired[e.From()] = true
	}
	for i := range p.nodes {
		if len(p.inEdges[i]) == 0 {
			p.entries = append(p.entries, i)
		}
	}
	if err := p.checkAcyclic(); err != nil {
		return nil, err
	}
	for _, pn := range p.nodes {
		if err := pn.prepare(depth); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// checkAcyclic runs Kahn's algorithm; a node never reaching in-degree zero lies on a cycle.
func (p *plan) checkAcyclic() error {
	deg := make([]int, len(p.nodes))
	for i := range p.nodes {
		deg[i] = len(p.inEdges[i])
	}
	queue := append([]int(nil), p.entries...)
	seen := 0
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		seen++
		for _, ei := range p.outEdges[i] {
			t := p.index[p.g.Edges[ei].Target]
			deg[t]--
			if deg[t] == 0 {
				queue = append(queue, t)
			}
		}
	}
	if seen != len(p.nodes) {
		for i, d := range deg {
			if d > 0 {
				return ErrInvalidGraph.Msg("graph has a cycle through node %q", p.nodes[i].node.ID).WithDetails(map[string]any{"node": p.nodes[i].node.ID})
			}
		}
	}
	return nil
}

// prepare compiles what the node kind needs. Only body structure errors are returned.
func (pn *pnode) prepare(depth int) error {
	n := pn.node
	switch n.Kind {
	case graph.KindTransform:
		pn.prog, pn.progErr = compileExpr(n.Expr)
	case graph.KindRouter:
		if tok, ok := graph.IsSingleToken(n.Select); ok {
			pn.selTok = &tok
		} else {
			pn.prog, pn.progErr = compileExpr(n.Select)
		}
	case graph.KindGuardrail:
		if n.Check != "" {
			pn.prog, pn.progErr = compileExpr(n.Check)
		}
		pn.checks, pn.checksErr = compileChecks(n.Checks)
	case graph.KindLoop, graph.KindMap:
		if n.Body == nil {
			pn.bodyErr = fmt.Errorf("%s node has no body", n.Kind)
		} else if body, err := compile(n.Body, depth+1); err != nil {
			return err
		} else {
			pn.body = body
		}
		if n.Kind == graph.KindLoop {
			if n.Until != "" {
				pn.until, pn.untilErr = compileExpr(n.Until)
			}
		} else {
			tok, err := graph.ParseToken(n.Over)
			if err != nil {
				pn.overErr = err
			} else {
				pn.overTok = &tok
			}
		}
	}
	return nil
}

// compileChecks prepares guardrail built-ins: regexps compiled, schemas compiled.
func compileChecks(specs []graph.GuardrailCheck) ([]compiledCheck, error) {
	out := make([]compiledCheck, 0, len(specs))
	for i, c := range specs {
		cc := compiledCheck{spec: c}
		if c.Field != "" {
			tok, err := graph.ParseToken(c.Field)
			if err != nil {
				return nil, fmt.Errorf("checks[%d].field: %w", i, err)
			}
			cc.field = &tok
		}
		switch c.Type {
		case "maxLength", "minLength", "notEmpty":
		case "denyPatterns", "requirePatterns":
			for _, pat := range c.Patterns {
				re, err := regexp.Compile(pat)
				if err != nil {
					return nil, fmt.Errorf("checks[%d]: bad pattern %q: %w", i, pat, err)
				}
				cc.regexps = append(cc.regexps, re)
			}
		case "jsonSchema":
			sch, err := graph.CompileJSONSchema(c.Schema)
			if err != nil {
				return nil, fmt.Errorf("checks[%d]: bad schema: %w", i, err)
			}
			cc.schema = sch
		default:
			return nil, fmt.Errorf("checks[%d]: unknown check type %q", i, c.Type)
		}
		out = append(out, cc)
	}
	return out, nil
}

// planCache holds compiled plans by content key. It is bounded; when full, an arbitrary entry
// is dropped (plans are cheap to rebuild, and hot graphs come straight back).
type planCache struct {
	mu    sync.Mutex
	max   int
	plans map[string]*plan
}

func newPlanCache(max int) *planCache {
	if max <= 0 {
		max = 256
	}
	return &planCache{max: max, plans: make(map[string]*plan)}
}

// get returns the plan for g, compiling it on a miss. key may be empty: it is then derived
// from the graph's JSON encoding (encoding/json sorts map keys, so it is stable).
func (c *planCache) get(g *graph.Graph, key string) (*plan, error) {
	if key == "" {
		raw, err := json.Marshal(g)
		if err != nil {
			return nil, ErrInvalidGraph.Msg("graph is not serialisable").Wrap(err)
		}
		sum := sha256.Sum256(raw)
		key = "json:" + hex.EncodeToString(sum[:])
	}
	c.mu.Lock()
	p, ok := c.plans[key]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := compile(g, 0)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.plans) >= c.max {
		for k := range c.plans {
			delete(c.plans, k)
			break
		}
	}
	c.plans[key] = p
	c.mu.Unlock()
	return p, nil
}

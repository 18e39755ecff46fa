package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Validate parses an IR document and checks it against the JSON Schema and the semantic rules
// (docs/ir.md), reporting every problem at once. The graph is returned whenever the document
// could be decoded, even with problems; callers must treat len(problems) > 0 as invalid.
// An empty top-level id is allowed here (a run of an unsaved graph has none).
func Validate(raw json.RawMessage) (*Graph, Problems) {
	if len(raw) > MaxIRBytes {
		return nil, Problems{{Path: "", Message: fmt.Sprintf("the IR is larger than %d bytes", MaxIRBytes)}}
	}
	instance, err := parseStrict(raw, MaxIRDepth)
	if err != nil {
		var dup *DuplicateKeyError
		if errors.As(err, &dup) {
			return nil, Problems{{Path: dup.Path, Message: fmt.Sprintf("duplicate key %q", dup.Key)}}
		}
		return nil, Problems{{Path: "", Message: "the IR is not valid JSON: " + strings.TrimPrefix(err.Error(), "graph: ")}}
	}
	if _, ok := instance.(map[string]any); !ok {
		return nil, Problems{{Path: "", Message: "the IR must be a JSON object"}}
	}
	if n := countNodes(instance, 0); n > MaxTotalNodes {
		return nil, Problems{{Path: "", Message: fmt.Sprintf("the IR has %d nodes, more than the limit of %d (bodies included)", n, MaxTotalNodes)}}
	}

	sch, err := compiledSchema()
	if err != nil {
		// The embedded schema is tested; failing here is a build defect, not client input.
		panic(err)
	}
	var problems Problems
	problems = append(problems, sch.validate(instance)...)

	var g Graph
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&g); err != nil {
		if len(problems) == 0 {
			problems = append(problems, Problem{Path: "", Message: "the IR does not decode: " + err.Error()})
		}
		return nil, finish(problems, instance)
	}
	v := &validator{topID: g.ID}
	v.graph(&g, "", 0)
	problems = append(problems, v.problems...)
	return &g, finish(problems, instance)
}

// finish fills in the node of each problem from its path, then sorts.
func finish(ps Problems, instance any) Problems {
	for i := range ps {
		if ps[i].Node == "" {
			ps[i].Node = nodeForPath(instance, ps[i].Path)
		}
	}
	return sortProblems(ps)
}

// nodeForPath names the node a JSON pointer falls in: ids of enclosing nodes joined by "/"
// ("loop/step" for /nodes/2/body/nodes/0/expr). Empty when the path is outside any node.
func nodeForPath(instance any, path string) string {
	if path == "" {
		return ""
	}
	segs := strings.Split(path[1:], "/")
	var ids []string
	cur := instance
	for i := 0; i < len(segs); i++ {
		seg := strings.ReplaceAll(strings.ReplaceAll(segs[i], "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[seg]
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(c) {
				return strings.Join(ids, "/")
			}
			cur = c[n]
			if i > 0 && segs[i-1] == "nodes" && (i == 1 || segs[i-2] == "body") {
				m, _ := cur.(map[string]any)
				id, _ := m["id"].(string)
				if id == "" {
					id = "#" + seg
				}
				ids = append(ids, id)
			}
		default:
			return strings.Join(ids, "/")
		}
	}
	return strings.Join(ids, "/")
}

// countNodes counts nodes of a generic IR document, bodies included.
func countNodes(v any, depth int) int {
	obj, ok := v.(map[string]any)
	if !ok || depth > MaxIRDepth {
		return 0
	}
	nodes, _ := obj["nodes"].([]any)
	n := len(nodes)
	for _, e := range nodes {
		if no, ok := e.(map[string]any); ok {
			n += countNodes(no["body"], depth+1)
		}
	}
	return n
}

type validator struct {
	topID    string
	problems Problems
}

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// graph checks one graph (the top level or a body) at JSON pointer base.
func (v *validator) graph(g *Graph, base string, depth int) {
	byID := map[string]int{}
	for i := range g.Nodes {
		id := g.Nodes[i].ID
		if id == "" {
			continue // the schema reports it
		}
		if j, dup := byID[id]; dup {
			v.add(pointer(base, "nodes", i, "id"), "duplicate node id %q (first used at %s)", id, pointer(base, "nodes", j))
			continue
		}
		byID[id] = i
	}

	incoming := map[string][]string{} // node id → target ports with an edge
	seenEdge := map[Edge]int{}
	for i, e := range g.Edges {
		ep := pointer(base, "edges", i)
		key := Edge{Source: e.Source, SourcePort: e.From(), Target: e.Target, TargetPort: e.To()}
		if j, dup := seenEdge[key]; dup {
			v.add(ep, "duplicate of edge %s", pointer(base, "edges", j))
			continue
		}
		seenEdge[key] = i
		si, srcOK := byID[e.Source]
		if e.Source != "" && !srcOK {
			v.add(pointer(ep, "source"), "edge source %q is not a node of this graph", e.Source)
		}
		ti, tgtOK := byID[e.Target]
		if e.Target != "" && !tgtOK {
			v.add(pointer(ep, "target"), "edge target %q is not a node of this graph", e.Target)
		}
		if srcOK {
			src := &g.Nodes[si]
			ports := OutputPorts(src)
			if !slices.Contains(ports, e.From()) {
				if len(ports) == 0 {
					v.add(pointer(ep, "sourcePort"), "node %q (%s) has no output ports", src.ID, src.Kind)
				} else {
					v.add(pointer(ep, "sourcePort"), "node %q (%s) has no output port %q; its output ports are %s", src.ID, src.Kind, e.From(), quoteList(ports))
				}
			}
		}
		if tgtOK {
			_ = ti
			if !slices.Contains(incoming[e.Target], e.To()) {
				incoming[e.Target] = append(incoming[e.Target], e.To())
			}
		}
	}

	v.cycles(g, base, byID)

	for i := range g.Nodes {
		n := &g.Nodes[i]
		ports := incoming[n.ID]
		if len(ports) == 0 {
			ports = []string{PortIn} // entry node: the run input (or the body input) arrives on "in"
		}
		v.node(n, pointer(base, "nodes", i), ports, depth)
	}
}

// node checks one node's fields; ports are the input ports that receive values.
func (v *validator) node(n *Node, np string, ports []string, depth int) {
	if n.Expr != "" {
		v.expression(pointer(np, "expr"), n.Expr, ports)
	}
	if n.Select != "" {
		v.selector(pointer(np, "select"), n.Select, ports)
	}
	if n.Check != "" {
		v.expression(pointer(np, "check"), n.Check, ports)
	}
	for i, c := range n.Checks {
		cp := pointer(np, "checks", i)
		if c.Field != "" {
			if tok, ok := IsSingleToken(c.Field); !ok {
				v.add(pointer(cp, "field"), "field must be a single $in.<port>.<path> token")
			} else {
				v.port(pointer(cp, "field"), tok.Port, ports, "token "+tok.Raw)
			}
		}
		for j, p := range c.Patterns {
			if _, err := regexp.Compile(p); err != nil {
				v.add(pointer(cp, "patterns", j), "invalid regular expression: %v", err)
			}
		}
		if c.Type == "maxLength" && c.Max < 0 || c.Type == "minLength" && c.Min < 0 {
			continue // the schema reports it
		}
		if c.Schema != nil {
			if _, err := CompileJSONSchema(c.Schema); err != nil {
				v.add(pointer(cp, "schema"), "invalid JSON Schema: %s", firstLine(err))
			}
		}
	}
	if n.Tool != nil {
		tp := pointer(np, "tool")
		v.template(pointer(tp, "url"), n.Tool.URL, ports)
		for k, h := range n.Tool.Headers {
			v.template(pointer(tp, "headers", k), h, ports)
		}
		v.templateValue(pointer(tp, "body"), n.Tool.Body, ports)
		v.templateValue(pointer(tp, "arguments"), n.Tool.Arguments, ports)
	}
	v.template(pointer(np, "system"), n.System, ports)
	v.template(pointer(np, "prompt"), n.Prompt, ports)
	for i, m := range n.Messages {
		v.template(pointer(np, "messages", i, "content"), m.Content, ports)
	}
	if n.JSONSchema != nil {
		if _, err := CompileJSONSchema(n.JSONSchema); err != nil {
			v.add(pointer(np, "jsonSchema"), "invalid JSON Schema: %s", firstLine(err))
		}
	}
	if n.Kind == KindLLM && n.JSONSchema != nil && n.ResponseFormat != "json" {
		v.add(pointer(np, "responseFormat"), `jsonSchema needs responseFormat "json"`)
	}
	v.templateValue(pointer(np, "value"), n.Value, ports)
	if n.Kind == KindSubgraph && n.Agent != "" && n.Agent == v.topID {
		v.add(pointer(np, "agent"), "a subgraph cannot run the agent it belongs to")
	}
	if n.Over != "" {
		if tok, ok := IsSingleToken(n.Over); !ok {
			v.add(pointer(np, "over"), "over must be a single $in.<port>.<path> token naming a list")
		} else {
			v.port(pointer(np, "over"), tok.Port, ports, "token "+tok.Raw)
		}
	}
	if n.Until != "" {
		// until is evaluated after each iteration with $in.in bound to that iteration's output.
		v.expression(pointer(np, "until"), n.Until, []string{PortIn})
	}
	if n.Body != nil && (n.Kind == KindLoop || n.Kind == KindMap) {
		bp := pointer(np, "body")
		if depth+1 > MaxBodyNesting {
			v.add(bp, "bodies nest deeper than %d levels", MaxBodyNesting)
			return
		}
		if !slices.ContainsFunc(n.Body.Nodes, func(b Node) bool { return b.Kind == KindOutput }) {
			v.add(pointer(bp, "nodes"), "a %s body needs an output node: its value is the result of one %s", n.Kind, map[string]string{KindLoop: "iteration", KindMap: "element"}[n.Kind])
		}
		v.graph(n.Body, bp, depth+1)
	}
}

func (v *validator) port(path, port string, ports []string, what string) {
	if slices.Contains(ports, port) {
		return
	}
	if len(ports) == 1 && ports[0] == PortIn {
		v.add(path, "%s reads port %q, but this node only receives %q", what, port, PortIn)
		return
	}
	v.add(path, "%s reads port %q, which has no incoming edge; this node's input ports are %s", what, port, quoteList(ports))
}

func (v *validator) template(path, s string, ports []string) {
	for _, tok := range FindTokens(s) {
		v.port(path, tok.Port, ports, "token "+tok.Raw)
	}
}

func (v *validator) templateValue(path string, val any, ports []string) {
	templateStrings(val, path, func(p, s string) { v.template(p, s, ports) })
}

func (v *validator) expression(path, src string, ports []string) {
	if _, err := CompileExpr(src); err != nil {
		v.add(path, "expression: %v", err)
		return
	}
	used, _, err := ExprInputPorts(src)
	if err != nil {
		return
	}
	for _, p := range used {
		v.port(path, p, ports, "expression")
	}
}

// selector checks a field that is a single token or an expression.
func (v *validator) selector(path, src string, ports []string) {
	if tok, ok := IsSingleToken(src); ok {
		v.port(path, tok.Port, ports, "token "+tok.Raw)
		return
	}
	v.expression(path, src, ports)
}

// cycles reports each strongly connected component with more than one node (or a self edge)
// once, naming its nodes.
func (v *validator) cycles(g *Graph, base string, byID map[string]int) {
	n := len(g.Nodes)
	adj := make([][]int, n)
	firstEdge := map[[2]int]int{}
	for i, e := range g.Edges {
		s, ok1 := byID[e.Source]
		t, ok2 := byID[e.Target]
		if !ok1 || !ok2 {
			continue
		}
		adj[s] = append(adj[s], t)
		if _, ok := firstEdge[[2]int{s, t}]; !ok {
			firstEdge[[2]int{s, t}] = i
		}
	}
	// Iterative Tarjan, so deep chains cannot exhaust the stack.
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	next := 0
	type frame struct{ node, edge int }
	for root := range n {
		if index[root] >= 0 {
			continue
		}
		call := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.edge < len(adj[f.node]) {
				w := adj[f.node][f.edge]
				f.edge++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				} else if onStack[w] {
					low[f.node] = min(low[f.node], index[w])
				}
				continue
			}
			u := f.node
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].node
				low[p] = min(low[p], low[u])
			}
			if low[u] != index[u] {
				continue
			}
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == u {
					break
				}
			}
			_, selfLoop := firstEdge[[2]int{u, u}]
			if len(comp) == 1 && !selfLoop {
				continue
			}
			slices.Sort(comp)
			// Point at the lowest-numbered edge inside the component.
			edgeIdx := -1
			inComp := map[int]bool{}
			for _, c := range comp {
				inComp[c] = true
			}
			ids := make([]string, len(comp))
			for k, c := range comp {
				ids[k] = g.Nodes[c].ID
				for _, w := range adj[c] {
					if inComp[w] {
						if ei := firstEdge[[2]int{c, w}]; edgeIdx < 0 || ei < edgeIdx {
							edgeIdx = ei
						}
					}
				}
			}
			v.add(pointer(base, "edges", edgeIdx), "cycle through nodes %s: graphs must be acyclic (use a loop node to repeat)", quoteList(ids))
		}
	}
}

func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

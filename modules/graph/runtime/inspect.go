package runtime

import "github.com/svc-dev/svc/modules/graph"

// RequiresDurable reports whether g (bodies included) holds a human, subgraph, loop or map
// node: SPEC.md lets such agents run only in durable mode.
func RequiresDurable(g *graph.Graph) bool {
	if g == nil {
		return false
	}
	for i := range g.Nodes {
		switch g.Nodes[i].Kind {
		case graph.KindHuman, graph.KindSubgraph, graph.KindLoop, graph.KindMap:
			return true
		}
	}
	return false
}

// AnswerNodes returns the top-level llm nodes from which an output node is reachable without
// passing through another llm node: the nodes whose delta events are the run's answer tokens
// (other llm nodes are intermediate steps, whose tokens a run stream leaves out).
func AnswerNodes(g *graph.Graph) map[string]bool {
	out := map[string]bool{}
	if g == nil {
		return out
	}
	next := map[string][]string{}
	for _, e := range g.Edges {
		next[e.Source] = append(next[e.Source], e.Target)
	}
	kind := map[string]string{}
	for _, n := range g.Nodes {
		kind[n.ID] = n.Kind
	}
	for _, n := range g.Nodes {
		if n.Kind != graph.KindLLM {
			continue
		}
		seen := map[string]bool{n.ID: true}
		stack := []string{n.ID}
		for len(stack) > 0 && !out[n.ID] {
			cur := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, t := range next[cur] {
				if kind[t] == graph.KindOutput {
					out[n.ID] = true
					break
				}
				if !seen[t] && kind[t] != graph.KindLLM {
					seen[t] = true
					stack = append(stack, t)
				}
			}
		}
	}
	return out
}

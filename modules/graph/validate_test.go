package graph

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const triageIR = `{
  "id": "triage",
  "nodes": [
    {"id": "route", "kind": "router", "select": "$in.in.kind", "handles": ["bug", "question"]},
    {"id": "eng", "kind": "transform", "expr": "{queue: \"eng\", title: $in.in.title}"},
    {"id": "support", "kind": "transform", "expr": "{queue: \"support\", title: $in.in.title}"},
    {"id": "out", "kind": "output"}
  ],
  "edges": [
    {"source": "route", "sourcePort": "bug", "target": "eng"},
    {"source": "route", "sourcePort": "question", "target": "support"},
    {"source": "eng", "target": "out"},
    {"source": "support", "target": "out"}
  ]
}`

// everyKindIR uses every node kind once; it must be valid.
const everyKindIR = `{
  "id": "all-kinds",
  "name": "All kinds",
  "description": "one of each",
  "metadata": {"owner": "tests"},
  "nodes": [
    {"id": "guard", "kind": "guardrail", "check": "len($in.in.text) > 0",
     "checks": [{"type": "maxLength", "max": 1000, "field": "$in.in.text"}, {"type": "denyPatterns", "patterns": ["(?i)password"]},
                {"type": "jsonSchema", "schema": {"type": "object", "required": ["text"]}}, {"type": "notEmpty"}]},
    {"id": "fetch", "kind": "tool", "timeoutMs": 5000,
     "tool": {"type": "http", "method": "POST", "url": "https://api.example.com/items/$in.in.id", "headers": {"X-Q": "$in.in.text"}, "body": {"q": "$in.in.text", "tags": ["$in.in.tags[0]"]}, "connection": "example"}},
    {"id": "mcp", "kind": "tool", "tool": {"type": "mcp", "server": "files", "name": "read", "arguments": {"path": "$in.in.body.path"}}},
    {"id": "ask", "kind": "llm", "model": "chat-small", "system": "Be brief.", "prompt": "Summarise: $in.in.body", "params": {"temperature": 0.2, "maxTokens": 200}, "responseFormat": "json", "jsonSchema": {"type": "object"}},
    {"id": "chat", "kind": "llm", "model": "chat-small", "messages": [{"role": "user", "content": "$in.in.text"}]},
    {"id": "approve", "kind": "human", "prompt": "Approve $in.in.text?"},
    {"id": "sub", "kind": "subgraph", "agent": "helper", "version": "3"},
    {"id": "repeat", "kind": "loop", "maxIterations": 5, "until": "$in.in.done",
     "body": {"nodes": [{"id": "step", "kind": "transform", "expr": "{done: true, n: $in.in}"}, {"id": "res", "kind": "output"}], "edges": [{"source": "step", "target": "res"}]}},
    {"id": "each", "kind": "map", "over": "$in.in.items", "concurrency": 4,
     "body": {"nodes": [{"id": "double", "kind": "transform", "expr": "$in.in * 2"}, {"id": "res", "kind": "output", "value": "$in.in"}], "edges": [{"source": "double", "target": "res"}]}},
    {"id": "merge", "kind": "transform", "expr": "{text: $in.in.text, side: $in.side}"},
    {"id": "route", "kind": "router", "select": "$in.in.text == \"\" ? \"empty\" : \"full\"", "handles": ["empty", "full"]},
    {"id": "out", "kind": "output", "value": {"result": "$in.in", "note": "done for $in.in.text"}}
  ],
  "edges": [
    {"source": "guard", "sourcePort": "pass", "target": "fetch"},
    {"source": "guard", "sourcePort": "fail", "target": "approve"},
    {"source": "fetch", "target": "mcp"},
    {"source": "fetch", "sourcePort": "err", "target": "chat"},
    {"source": "mcp", "target": "ask"},
    {"source": "approve", "target": "sub"},
    {"source": "sub", "target": "repeat"},
    {"source": "repeat", "target": "each"},
    {"source": "ask", "target": "merge"},
    {"source": "chat", "target": "merge", "targetPort": "side"},
    {"source": "merge", "target": "route"},
    {"source": "route", "sourcePort": "full", "target": "out"}
  ]
}`

func TestValidateAcceptsExamples(t *testing.T) {
	for name, doc := range map[string]string{"greeter": greeterIR, "triage": triageIR, "every kind": everyKindIR} {
		g, ps := Validate(json.RawMessage(doc))
		if len(ps) != 0 {
			t.Errorf("%s: unexpected problems %+v", name, ps)
		}
		if g == nil || len(g.Nodes) == 0 {
			t.Errorf("%s: no graph", name)
		}
	}
	// An unsaved graph (POST /graphs/runs) may omit the id.
	if _, ps := Validate(json.RawMessage(`{"nodes":[{"id":"o","kind":"output"}]}`)); len(ps) != 0 {
		t.Errorf("id-less graph: %+v", ps)
	}
}

type wantProblem struct {
	path, node, msg string // msg is a substring
}

// mutate replaces old with new in doc exactly once (the test fails otherwise).
func mutate(t *testing.T, doc, old, new string) string {
	t.Helper()
	if strings.Count(doc, old) != 1 {
		t.Fatalf("mutation %q matches %d times", old, strings.Count(doc, old))
	}
	return strings.Replace(doc, old, new, 1)
}

func TestValidateProblems(t *testing.T) {
	tests := []struct {
		name string
		doc  func(t *testing.T) string
		want []wantProblem // all must appear; nothing else may
	}{
		{"not JSON", func(*testing.T) string { return `{"id":` }, []wantProblem{{"", "", "not valid JSON"}}},
		{"not an object", func(*testing.T) string { return `[1,2]` }, []wantProblem{{"", "", "must be a JSON object"}}},
		{"duplicate key", func(*testing.T) string { return `{"nodes":[{"id":"a","id":"b","kind":"output"}]}` }, []wantProblem{{"/nodes/0", "", `duplicate key "id"`}}},
		{"unknown kind", func(t *testing.T) string { return mutate(t, greeterIR, `"kind": "output"`, `"kind": "outptu"`) },
			[]wantProblem{{"/nodes/1/kind", "out", "must be one of"}}},
		{"unknown field", func(t *testing.T) string { return mutate(t, greeterIR, `"expr":`, `"exp":`) },
			[]wantProblem{{"/nodes/0", "shape", "missing property 'expr'"}, {"/nodes/0", "shape", "'exp' not allowed"}}},
		{"unknown top-level field", func(t *testing.T) string {
			return mutate(t, greeterIR, `"id": "greeter",`, `"id": "greeter", "nmae": "x",`)
		},
			[]wantProblem{{"", "", "'nmae' not allowed"}}},
		{"field of another kind", func(t *testing.T) string {
			return mutate(t, greeterIR, `"kind": "output",`, `"kind": "output", "model": "m",`)
		},
			[]wantProblem{{"/nodes/1", "out", "'model' not allowed"}}},
		{"duplicate node ids", func(t *testing.T) string { return mutate(t, greeterIR, `{"id": "out"`, `{"id": "shape"`) },
			[]wantProblem{{"/nodes/1/id", "shape", `duplicate node id "shape"`}, {"/edges/0/target", "", `"out" is not a node`}}},
		{"edge to a missing node", func(t *testing.T) string { return mutate(t, greeterIR, `"target": "out"`, `"target": "nowhere"`) },
			[]wantProblem{{"/edges/0/target", "", `"nowhere" is not a node`}}},
		{"edge from a missing port", func(t *testing.T) string {
			return mutate(t, greeterIR, `{"source": "shape", "target": "out"}`, `{"source": "shape", "sourcePort": "err", "target": "out"}`)
		}, []wantProblem{{"/edges/0/sourcePort", "", `no output port "err"`}}},
		{"edge from an output node", func(t *testing.T) string {
			return mutate(t, greeterIR, `{"source": "shape", "target": "out"}`, `{"source": "shape", "target": "out"}, {"source": "out", "target": "shape", "targetPort": "x"}`)
		}, []wantProblem{{"/edges/1/sourcePort", "", "has no output ports"}, {"/edges/0", "", `cycle through nodes "shape", "out"`},
			{"/nodes/0/expr", "shape", `reads port "in", which has no incoming edge; this node's input ports are "x"`}}},
		{"router handle ports", func(t *testing.T) string { return mutate(t, triageIR, `"sourcePort": "bug"`, `"sourcePort": "bugs"`) },
			[]wantProblem{{"/edges/0/sourcePort", "", `no output port "bugs"; its output ports are "bug", "question"`}}},
		{"cycle", func(t *testing.T) string {
			return mutate(t, greeterIR, `{"source": "shape", "target": "out"}`, `{"source": "shape", "target": "mid"}, {"source": "mid", "target": "shape"}`) +
				""
		}, nil}, // replaced below
		{"token naming an unknown port", func(t *testing.T) string { return mutate(t, greeterIR, `"$in.in.greeting"`, `"Hi $in.side.greeting"`) },
			[]wantProblem{{"/nodes/1/value", "out", `reads port "side"`}}},
		{"expression naming an unknown port", func(t *testing.T) string { return mutate(t, greeterIR, `$in.in.name`, `$in.ctx.name`) },
			[]wantProblem{{"/nodes/0/expr", "shape", `reads port "ctx", but this node only receives "in"`}}},
		{"expression syntax error", func(t *testing.T) string {
			return mutate(t, greeterIR, `{greeting: \"Hello, \" + $in.in.name}`, `{greeting: `)
		},
			[]wantProblem{{"/nodes/0/expr", "shape", "expression:"}}},
		{"unknown variable", func(t *testing.T) string { return mutate(t, greeterIR, `$in.in.name}`, `name}`) },
			[]wantProblem{{"/nodes/0/expr", "shape", "unknown name name"}}},
		{"router without handles", func(t *testing.T) string {
			return mutate(t, triageIR, `"handles": ["bug", "question"]`, `"handles": []`)
		},
			[]wantProblem{{"/nodes/0/handles", "route", "minItems"}, {"/edges/0/sourcePort", "", `no output ports`}, {"/edges/1/sourcePort", "", `no output ports`}}},
		{"router with duplicate handles", func(t *testing.T) string {
			return mutate(t, triageIR, `["bug", "question"]`, `["bug", "bug", "question"]`)
		},
			[]wantProblem{{"/nodes/0/handles", "route", "items at 0 and 1 are equal"}}},
		{"router without select", func(t *testing.T) string { return mutate(t, triageIR, `"select": "$in.in.kind", `, ``) },
			[]wantProblem{{"/nodes/0", "route", "missing property 'select'"}}},
		{"loop limits", func(t *testing.T) string {
			return `{"nodes":[{"id":"l","kind":"loop","maxIterations":0,"until":"true","body":{"nodes":[{"id":"o","kind":"output"}]}}]}`
		}, []wantProblem{{"/nodes/0/maxIterations", "l", "minimum"}}},
		{"loop without until", func(t *testing.T) string {
			return `{"nodes":[{"id":"l","kind":"loop","maxIterations":3,"body":{"nodes":[{"id":"o","kind":"output"}]}}]}`
		}, []wantProblem{{"/nodes/0", "l", "missing property 'until'"}}},
		{"invalid body", func(t *testing.T) string {
			return `{"nodes":[{"id":"m","kind":"map","over":"$in.in.items","concurrency":65,"body":{"nodes":[{"id":"t","kind":"transform","expr":"$in.x"}, {"id":"t","kind":"output"}]}}]}`
		}, []wantProblem{
			{"/nodes/0/concurrency", "m", "maximum"},
			{"/nodes/0/body/nodes/0/expr", "m/t", `reads port "x"`},
			{"/nodes/0/body/nodes/1/id", "m/t", `duplicate node id "t"`},
		}},
		{"body without output", func(t *testing.T) string {
			return `{"nodes":[{"id":"m","kind":"map","over":"$in.in","body":{"nodes":[{"id":"t","kind":"transform","expr":"1"}]}}]}`
		}, []wantProblem{{"/nodes/0/body/nodes", "m", "needs an output node"}}},
		{"subgraph pin", func(t *testing.T) string {
			return `{"id":"me","nodes":[{"id":"s","kind":"subgraph","agent":"me","version":"1","contentHash":"sha256:` + strings.Repeat("a", 64) + `"}]}`
		}, []wantProblem{{"/nodes/0", "s", "at most one of 'version' and 'contentHash'"}, {"/nodes/0/agent", "s", "cannot run the agent it belongs to"}}},
		{"llm needs prompt", func(t *testing.T) string { return `{"nodes":[{"id":"a","kind":"llm","model":"m"}]}` },
			[]wantProblem{{"/nodes/0", "a", "needs one of 'prompt' or 'messages'"}}},
		{"tool http needs method and url", func(t *testing.T) string { return `{"nodes":[{"id":"a","kind":"tool","tool":{"type":"http"}}]}` },
			[]wantProblem{{"/nodes/0/tool", "a", "missing properties 'method', 'url'"}}},
		{"tool mcp needs server and name", func(t *testing.T) string {
			return `{"nodes":[{"id":"a","kind":"tool","tool":{"type":"mcp","url":"x"}}]}`
		},
			[]wantProblem{{"/nodes/0/tool", "a", "missing properties 'server', 'name'"}, {"/nodes/0/tool", "a", "'url' not allowed"}}},
		{"guardrail bad regexp and schema", func(t *testing.T) string {
			return `{"nodes":[{"id":"g","kind":"guardrail","checks":[{"type":"denyPatterns","patterns":["("]},{"type":"jsonSchema","schema":{"type":"nope"}},{"type":"jsonSchema","schema":{"$ref":"file:///etc/passwd"}}]}]}`
		}, []wantProblem{{"/nodes/0/checks/0/patterns/0", "g", "invalid regular expression"}, {"/nodes/0/checks/1/schema", "g", "invalid JSON Schema"}, {"/nodes/0/checks/2/schema", "g", "invalid JSON Schema"}}},
		{"guardrail needs a check", func(t *testing.T) string { return `{"nodes":[{"id":"g","kind":"guardrail"}]}` },
			[]wantProblem{{"/nodes/0", "g", "needs one of 'check' or 'checks'"}}},
		{"empty nodes", func(t *testing.T) string { return `{"id":"x","nodes":[]}` }, []wantProblem{{"/nodes", "", "minItems"}}},
		{"wrong types", func(t *testing.T) string { return `{"id":5,"nodes":{}}` }, []wantProblem{{"/id", "", "want string"}, {"/nodes", "", "want array"}}},
		{"until reads body output", func(t *testing.T) string {
			return `{"nodes":[{"id":"l","kind":"loop","maxIterations":3,"until":"$in.out.x","body":{"nodes":[{"id":"o","kind":"output"}]}}]}`
		}, []wantProblem{{"/nodes/0/until", "l", `reads port "out", but this node only receives "in"`}}},
		{"over is a token", func(t *testing.T) string {
			return `{"nodes":[{"id":"m","kind":"map","over":"$in.in.items ?? []","body":{"nodes":[{"id":"o","kind":"output"}]}}]}`
		}, []wantProblem{{"/nodes/0/over", "m", "single $in.<port>.<path> token"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.doc(t)
			if tt.name == "cycle" {
				doc = `{"nodes":[{"id":"a","kind":"transform","expr":"$in.in"},{"id":"b","kind":"transform","expr":"$in.in"},{"id":"c","kind":"transform","expr":"$in.in"},{"id":"o","kind":"output"}],
				 "edges":[{"source":"a","target":"b"},{"source":"b","target":"c"},{"source":"c","target":"b"},{"source":"c","target":"o"},{"source":"o","target":"o"}]}`
				tt.want = []wantProblem{{"/edges/1", "", `cycle through nodes "b", "c"`}, {"/edges/4", "", `cycle through nodes "o"`}, {"/edges/4/sourcePort", "", "no output ports"}}
			}
			_, ps := Validate(json.RawMessage(doc))
			if len(ps) != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%s", len(ps), len(tt.want), dump(ps))
			}
			for _, w := range tt.want {
				found := false
				for _, p := range ps {
					if p.Path == w.path && p.Node == w.node && strings.Contains(p.Message, w.msg) {
						found = true
					}
				}
				if !found {
					t.Errorf("missing problem %+v in\n%s", w, dump(ps))
				}
			}
		})
	}
}

func dump(ps Problems) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %s [%s] %s\n", p.Path, p.Node, p.Message)
	}
	return b.String()
}

func TestValidateReportsEverythingSorted(t *testing.T) {
	doc := `{"nodes":[
	  {"id":"a","kind":"transform","expr":"$in.zz"},
	  {"id":"b","kind":"bogus"},
	  {"id":"c","kind":"router","select":"$in.in.k","handles":["x"]}],
	 "edges":[{"source":"c","sourcePort":"y","target":"a"},{"source":"a","target":"q"}]}`
	_, ps := Validate(json.RawMessage(doc))
	want := []string{"/edges/0/sourcePort", "/edges/1/target", "/nodes/0/expr", "/nodes/1/kind"}
	if len(ps) != len(want) {
		t.Fatalf("got\n%s", dump(ps))
	}
	for i, p := range ps {
		if p.Path != want[i] {
			t.Fatalf("order: got\n%s", dump(ps))
		}
	}
	// Determinism: the same input gives the same problems.
	_, again := Validate(json.RawMessage(doc))
	if dump(again) != dump(ps) {
		t.Fatal("problems differ between runs")
	}
	// Node numbers sort numerically, not as text.
	if comparePointers("/nodes/2", "/nodes/10") >= 0 {
		t.Fatal("pointer order is textual")
	}
}

func TestValidateLimits(t *testing.T) {
	// Pathological JSON nesting is refused before any recursive work.
	deep := strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat(`}`, 10000)
	if _, ps := Validate(json.RawMessage(deep)); len(ps) != 1 || !strings.Contains(ps[0].Message, "nested deeper") {
		t.Fatalf("deep JSON: %s", dump(ps))
	}
	// Body nesting beyond MaxBodyNesting.
	body := `{"nodes":[{"id":"o","kind":"output"}]}`
	for range MaxBodyNesting + 1 {
		body = `{"nodes":[{"id":"l","kind":"loop","maxIterations":1,"until":"true","body":` + body + `},{"id":"o","kind":"output"}],"edges":[{"source":"l","target":"o"}]}`
	}
	_, ps := Validate(json.RawMessage(body))
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "nest deeper") {
		t.Fatalf("deep bodies: %s", dump(ps))
	}
	// Too many nodes in total.
	var nodes []string
	for i := range MaxTotalNodes + 1 {
		nodes = append(nodes, fmt.Sprintf(`{"id":"n%d","kind":"output"}`, i))
	}
	if _, ps := Validate(json.RawMessage(`{"nodes":[` + strings.Join(nodes, ",") + `]}`)); len(ps) != 1 || !strings.Contains(ps[0].Message, "more than the limit") {
		t.Fatalf("too many nodes: %s", dump(ps))
	}
	big := `{"id":"x","description":"` + strings.Repeat("a", MaxIRBytes) + `","nodes":[]}`
	if _, ps := Validate(json.RawMessage(big)); len(ps) != 1 || !strings.Contains(ps[0].Message, "larger than") {
		t.Fatalf("big doc: %s", dump(ps))
	}
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		greeterIR, triageIR, everyKindIR, `{}`, `[]`, `null`, `{"nodes":[{"id":"a","kind":"zz"}]}`,
		`{"nodes":[{"id":"a","kind":"transform","expr":"$in.in.x"}],"edges":[{"source":"a","target":"a"}]}`,
		`{"nodes":[{"id":"l","kind":"loop","maxIterations":2,"until":"$in.out","body":{"nodes":[{"id":"o","kind":"output"}]}}]}`,
		`{"nodes":[{"id":"m","kind":"map","over":"$in.in[0]","body":{"nodes":[]}}],"edges":[{"source":"m","target":"m"}]}`,
		`{"nodes":[{"id":"a","kind":"output","value":{"x":["$in.q.y"]}}],"edges":[{}]}`,
		`{"id":1,"nodes":"x","edges":[1]}`, `{"nodes":[{"id":"a","id":"b"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, ps := Validate(json.RawMessage(data))
		if len(ps) == 0 {
			if g == nil {
				t.Fatal("valid document without a graph")
			}
			if _, err := ContentHash(json.RawMessage(data)); err != nil {
				t.Fatalf("valid document does not hash: %v", err)
			}
		}
		for _, p := range ps {
			if p.Message == "" {
				t.Fatalf("problem without a message: %+v", p)
			}
		}
	})
}

// Package graph holds the agent graph document (the IR): its types, JSON Schema,
// semantic validation, port rules, token syntax and content hash. It has no HTTP
// and no database; the runtime and the agents module build on it.
package graph

import "encoding/json"

// Node kinds.
const (
	KindTransform = "transform"
	KindRouter    = "router"
	KindGuardrail = "guardrail"
	KindTool      = "tool"
	KindLLM       = "llm"
	KindOutput    = "output"
	KindHuman     = "human"
	KindSubgraph  = "subgraph"
	KindLoop      = "loop"
	KindMap       = "map"
)

// Kinds lists every node kind the IR accepts.
var Kinds = []string{KindTransform, KindRouter, KindGuardrail, KindTool, KindLLM, KindOutput, KindHuman, KindSubgraph, KindLoop, KindMap}

// Default port names.
const (
	PortIn   = "in"
	PortOut  = "out"
	PortErr  = "err"
	PortPass = "pass"
	PortFail = "fail"
)

// Graph is the IR document. Fields outside the hash (name) are excluded by ContentHash.
type Graph struct {
	ID          string         `json:"id,omitempty"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Nodes       []Node         `json:"nodes"`
	Edges       []Edge         `json:"edges"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// Edge connects an output port of one node to an input port of another.
type Edge struct {
	Source     string `json:"source"`
	SourcePort string `json:"sourcePort,omitempty"` // default "out"
	Target     string `json:"target"`
	TargetPort string `json:"targetPort,omitempty"` // default "in"
}

// From returns the source port, defaulted.
func (e Edge) From() string {
	if e.SourcePort == "" {
		return PortOut
	}
	return e.SourcePort
}

// To returns the target port, defaulted.
func (e Edge) To() string {
	if e.TargetPort == "" {
		return PortIn
	}
	return e.TargetPort
}

// Node is one step of the graph. It is a flat union of every kind's fields; the JSON Schema
// says which fields belong to which kind.
type Node struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Label string `json:"label,omitempty"`

	// transform
	Expr string `json:"expr,omitempty"`

	// router: Select is a token or an expression; Handles are the declared output ports.
	Select  string   `json:"select,omitempty"`
	Handles []string `json:"handles,omitempty"`

	// guardrail: Check is a boolean expression; Checks are built-in checks (all must pass).
	Check  string           `json:"check,omitempty"`
	Checks []GuardrailCheck `json:"checks,omitempty"`

	// tool
	Tool *ToolSpec `json:"tool,omitempty"`

	// llm
	Model          string         `json:"model,omitempty"`
	System         string         `json:"system,omitempty"`
	Prompt         string         `json:"prompt,omitempty"` // llm prompt template; human prompt template
	Messages       []Message      `json:"messages,omitempty"`
	Params         map[string]any `json:"params,omitempty"`
	ResponseFormat string         `json:"responseFormat,omitempty"` // "text" (default) or "json"
	JSONSchema     map[string]any `json:"jsonSchema,omitempty"`     // optional schema for JSON output

	// output: Value is a template or token; default the whole $in.in.
	Value any `json:"value,omitempty"`

	// subgraph
	Agent       string `json:"agent,omitempty"`
	Version     string `json:"version,omitempty"`
	ContentHash string `json:"contentHash,omitempty"`

	// loop and map
	Body          *Graph `json:"body,omitempty"`
	Until         string `json:"until,omitempty"`
	MaxIterations int    `json:"maxIterations,omitempty"`
	Over          string `json:"over,omitempty"`
	Concurrency   int    `json:"concurrency,omitempty"`

	// TimeoutMs bounds one execution of the node (tool, llm); 0 means the kind's default.
	TimeoutMs int `json:"timeoutMs,omitempty"`
}

// GuardrailCheck is a built-in guardrail check.
type GuardrailCheck struct {
	Type     string         `json:"type"`               // maxLength | minLength | denyPatterns | requirePatterns | jsonSchema | notEmpty
	Max      int            `json:"max,omitempty"`      // maxLength
	Min      int            `json:"min,omitempty"`      // minLength
	Patterns []string       `json:"patterns,omitempty"` // denyPatterns / requirePatterns (Go regexp)
	Schema   map[string]any `json:"schema,omitempty"`   // jsonSchema
	Field    string         `json:"field,omitempty"`    // optional token selecting the checked value; default the whole $in.in
	Message  string         `json:"message,omitempty"`  // reason reported on fail
}

// ToolSpec is a tool node's call: type "http" or "mcp".
type ToolSpec struct {
	Type       string            `json:"type"`
	Method     string            `json:"method,omitempty"`
	URL        string            `json:"url,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       any               `json:"body,omitempty"`
	Server     string            `json:"server,omitempty"`
	Name       string            `json:"name,omitempty"`
	Arguments  any               `json:"arguments,omitempty"`
	Connection string            `json:"connection,omitempty"`
}

// Message is one chat message template of an llm node.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// InputPorts are the ports that edges may target on a node: "in" plus any port named by an
// incoming edge (nodes accept arbitrary named input ports, read with $in.<port>).
// OutputPorts returns the declared output ports of a node.
func OutputPorts(n *Node) []string {
	switch n.Kind {
	case KindRouter:
		return append([]string(nil), n.Handles...)
	case KindGuardrail:
		return []string{PortPass, PortFail}
	case KindTool:
		return []string{PortOut, PortErr}
	case KindOutput:
		return nil
	default:
		return []string{PortOut}
	}
}

// Decode parses a raw IR document into a Graph without validating it.
func Decode(raw json.RawMessage) (*Graph, error) {
	var g Graph
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

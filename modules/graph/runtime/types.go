// Package runtime executes IR graphs: dataflow over ports, dead-path elimination, bounded
// concurrency, node kinds, composite bodies (loop, map, subgraph), human parking and
// checkpoint/resume through a node-result store. It has no HTTP server and no database; the
// runs and durable-mode modules drive it through Spec and read its Result and events.
package runtime

import (
	"context"
	"net/http"
	"time"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/client"
)

// Run statuses a Result can carry.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusWaiting   = "waiting"
)

// Node result statuses.
const (
	NodeOK      = "ok"
	NodeFailed  = "failed" // the node failed without failing the run (tool err, model error)
	NodeSkipped = "skipped"
)

// ModelClient is the inference plane as the llm node sees it; platform/client.Inference
// implements it.
type ModelClient interface {
	ChatStream(ctx context.Context, req client.ChatRequest, onDelta func(client.Delta)) (*client.ChatResult, error)
}

// BasicAuth is a user/password pair applied as HTTP basic authentication.
type BasicAuth struct {
	Username string
	Password string
}

// Credential says how to apply a connection's secret to an outgoing HTTP request. Any
// combination of the fields may be set.
type Credential struct {
	Header string            // header name, e.g. "Authorization"
	Value  string            // header value, e.g. "Bearer sk-…"
	Query  map[string]string // query parameters to add
	Basic  *BasicAuth        // HTTP basic authentication
}

// ConnectionResolver resolves a connection name at step time. A missing, disabled or
// undecryptable connection is an error (ideally an *apperr.Error whose code names the cause);
// the tool node turns it into a value on its err port. Messages must not contain the secret.
type ConnectionResolver interface {
	Resolve(ctx context.Context, name string) (Credential, error)
}

// MCPCaller calls a tool on a named MCP server, optionally with a connection's credential.
type MCPCaller interface {
	CallTool(ctx context.Context, server, name string, args any, connection string) (any, error)
}

// SubgraphLoader loads a saved agent's graph for a subgraph node. version and contentHash may
// both be empty (latest). It returns the graph and the content hash of what was loaded.
type SubgraphLoader interface {
	Load(ctx context.Context, agent, version, contentHash string) (*graph.Graph, string, error)
}

// Deps are the executor's collaborators; all are optional, and a node needing a missing one
// fails the way a real outage would (a value on err, or a failed node with a note).
type Deps struct {
	Models      ModelClient
	Connections ConnectionResolver
	MCP         MCPCaller
	Agents      SubgraphLoader
	// HTTP is used by http tool nodes; nil means a client without a global timeout (each node
	// is bounded by its own timeout).
	HTTP *http.Client
	// MaxParallel bounds the node executions running at once within one run (default 8).
	MaxParallel int
	// PlanCacheSize bounds the compiled-graph cache (default 256 graphs).
	PlanCacheSize int
	// Now is the clock used for event timestamps (default time.Now).
	Now func() time.Time
}

// NodeError is the structured value of a failed node: what tool err ports carry and what
// failed nodes record.
type NodeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"status,omitempty"`
}

// NodeResult is a node's settled result as checkpointed by durable mode. Ports holds the
// value of every live output port (absent ports are dead); Value is the run output an output
// node delivered, or the result of a loop iteration or map element.
type NodeResult struct {
	Status string         `json:"status"`
	Ports  map[string]any `json:"ports,omitempty"`
	Value  any            `json:"value,omitempty"`
	Note   string         `json:"note,omitempty"`
	Error  *NodeError     `json:"error,omitempty"`
}

// HumanResult is the result to save under a waiting run's AwaitingNode when it is resumed:
// the resume input becomes the human node's output.
func HumanResult(input any) NodeResult {
	return NodeResult{Status: NodeOK, Ports: map[string]any{graph.PortOut: input}}
}

// NodeResultStore persists node results of one run. Keys are namespaced node ids: "a",
// "loopNode/2/inner", "mapNode[3]". Save is called from concurrent goroutines.
type NodeResultStore interface {
	Load(ctx context.Context) (map[string]NodeResult, error)
	Save(ctx context.Context, nodeID string, r NodeResult) error
}

// EventSink receives the run's events. Emit is called synchronously from node goroutines, so it
// must be fast and must never block (buffer and drop, or hand off to a channel).
type EventSink interface {
	Emit(Event)
}

// EventType names an event.
type EventType string

// Event types.
const (
	EventNodeStarted  EventType = "node.started"
	EventNodeFinished EventType = "node.finished"
	EventNodeFailed   EventType = "node.failed"
	EventNodeSkipped  EventType = "node.skipped"
	EventDelta        EventType = "delta"
	EventReasoning    EventType = "reasoning"
)

// KindIteration is the kind reported for a loop iteration or a map element, which have
// started/finished events of their own so traces can nest body nodes under them.
const KindIteration = "iteration"

// Event is one thing that happened in a run. NodeID is namespaced for nested nodes
// ("loopNode/2/inner", "mapNode[3]/inner", "sub/inner"); Parent is the enclosing iteration,
// element or subgraph node ("" at top level).
type Event struct {
	Type   EventType
	RunID  string
	NodeID string
	Kind   string
	Parent string
	Start  time.Time // started, finished, failed
	End    time.Time // finished, failed, skipped
	// Input holds the node's input port values (finished/failed); Output its live output
	// ports (finished/failed). Observability captures them under the agent's policy.
	Input  map[string]any
	Output map[string]any
	Error  *NodeError // failed; also finished with status failed (tool err)
	Status string     // node result status on finished events
	Text   string     // delta and reasoning
	// Restored is set on finished events of nodes whose result came from the store.
	Restored bool
	Attr     Attribution
}

// Attribution says what a node used: the model and tokens, or the tool and connection.
type Attribution struct {
	Model       string `json:"model,omitempty"`
	TokensIn    int    `json:"tokensIn,omitempty"`
	TokensOut   int    `json:"tokensOut,omitempty"`
	ToolType    string `json:"toolType,omitempty"`
	ToolHost    string `json:"toolHost,omitempty"`
	ToolName    string `json:"toolName,omitempty"`
	MCPServer   string `json:"mcpServer,omitempty"`
	Connection  string `json:"connection,omitempty"`
	Agent       string `json:"agent,omitempty"`
	ContentHash string `json:"contentHash,omitempty"`
	Iterations  int    `json:"iterations,omitempty"`
}

// Spec is one run to execute.
type Spec struct {
	RunID string
	Graph *graph.Graph
	// ContentHash, when known, keys the compiled-graph cache (saves hashing the graph).
	ContentHash string
	Input       any
	// Store makes the run durable: results are saved as nodes settle, and nodes with stored
	// results are not executed again. Nil for non-durable runs.
	Store NodeResultStore
	// Sink receives events; nil discards them.
	Sink EventSink
}

// Result is how a run ended.
type Result struct {
	Status string // completed, failed or waiting
	Output any
	// HasOutput is false when no output node executed (Output is then nil).
	HasOutput bool
	// Note explains a completed run's empty output, a failed tool, a model error or a
	// truncated answer; several causes are joined with "; ".
	Note string
	// Err is set when Status is failed; an *apperr.Error with a named code.
	Err error
	// AwaitingNode and Prompt are set when Status is waiting (a human node is parked).
	AwaitingNode string
	Prompt       string
}

package observability

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// OpenTelemetry GenAI semantic-convention keys used on model_call and tool_call spans. The
// semconv package matching the SDK (v1.43.0) no longer carries the gen_ai group, so the keys
// are spelled here.
const (
	genAIOperationName     = attribute.Key("gen_ai.operation.name")
	genAIRequestModel      = attribute.Key("gen_ai.request.model")
	genAIUsageInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	genAIUsageOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	genAIToolName          = attribute.Key("gen_ai.tool.name")
	serverAddress          = attribute.Key("server.address")
)

// OTLPExporter ships closed spans to an OTLP/HTTP collector, keeping the trace and span ids
// of GET /runs/{id}/trace so both views of a run can be matched.
type OTLPExporter struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// OTLPTracesURL turns SERVICE_OTLP_ENDPOINT into the traces URL: a base address
// (http://host:4318) gets the standard /v1/traces path, a full traces URL is kept.
func OTLPTracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("OTLP endpoint must be an http(s) URL such as http://127.0.0.1:4318")
	}
	if !strings.HasSuffix(u.Path, "/v1/traces") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

// NewOTLPExporter builds the exporter with a batching span processor; nothing is sent until
// spans are exported.
func NewOTLPExporter(ctx context.Context, endpoint, serviceVersion string) (*OTLPExporter, error) {
	target, err := OTLPTracesURL(endpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(target))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName("svc"), semconv.ServiceVersion(serviceVersion)))
	if err != nil {
		return nil, fmt.Errorf("otlp resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(contextIDs{}),
	)
	return &OTLPExporter{tp: tp, tracer: tp.Tracer("github.com/svc-dev/svc/modules/observability")}, nil
}

// ForceFlush sends queued spans now.
func (e *OTLPExporter) ForceFlush(ctx context.Context) error { return e.tp.ForceFlush(ctx) }

// Shutdown flushes and stops the exporter.
func (e *OTLPExporter) Shutdown(ctx context.Context) error { return e.tp.Shutdown(ctx) }

// Export replays recorded spans through the SDK with their own ids and timestamps.
func (e *OTLPExporter) Export(_ context.Context, info RunInfo, spans []Span) {
	tid := traceIDOf(info.RunID)
	for _, sp := range spans {
		if sp.End == nil {
			continue
		}
		ctx := context.WithValue(context.Background(), idsKey{}, fixedIDs{trace: tid, span: spanIDOf(sp.SpanID)})
		if sp.ParentID != "" {
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: spanIDOf(sp.ParentID), TraceFlags: trace.FlagsSampled, Remote: true}))
		}
		kind := trace.SpanKindInternal
		if sp.Kind == KindModelCall || sp.Kind == KindToolCall {
			kind = trace.SpanKindClient
		}
		_, s := e.tracer.Start(ctx, sp.Name, trace.WithTimestamp(sp.Start), trace.WithSpanKind(kind),
			trace.WithAttributes(otelAttributes(info, sp)...))
		switch sp.Status {
		case StatusError:
			msg := "error"
			if sp.Error != nil {
				msg = sp.Error.Code + ": " + sp.Error.Message
			}
			s.SetStatus(codes.Error, msg)
		case StatusOK:
			s.SetStatus(codes.Ok, "")
		}
		s.End(trace.WithTimestamp(*sp.End))
	}
}

func otelAttributes(info RunInfo, sp Span) []attribute.KeyValue {
	a := sp.Attributes
	kv := []attribute.KeyValue{
		attribute.String("svc.run.id", info.RunID),
		attribute.String("svc.span.kind", sp.Kind),
		attribute.String("svc.status", sp.Status),
	}
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, attribute.String(k, v))
		}
	}
	add("svc.node.id", sp.NodeID)
	add("svc.node.kind", sp.NodeKind)
	add("svc.agent.id", info.AgentID)
	add("svc.agent.version", info.Version)
	add("svc.content_hash", info.ContentHash)
	add("svc.connection", a.Connection)
	if a.Iterations > 0 {
		kv = append(kv, attribute.Int("svc.iterations", a.Iterations))
	}
	if sp.Error != nil {
		add("error.type", sp.Error.Code)
	}
	switch sp.Kind {
	case KindModelCall:
		kv = append(kv, genAIOperationName.String("chat"))
		if a.Model != "" {
			kv = append(kv, genAIRequestModel.String(a.Model))
		}
		if a.TokensIn > 0 {
			kv = append(kv, genAIUsageInputTokens.Int(a.TokensIn))
		}
		if a.TokensOut > 0 {
			kv = append(kv, genAIUsageOutputTokens.Int(a.TokensOut))
		}
	case KindToolCall:
		kv = append(kv, genAIOperationName.String("execute_tool"))
		name := a.ToolName
		if name == "" {
			name = a.ToolHost
		}
		if name != "" {
			kv = append(kv, genAIToolName.String(name))
		}
		add("svc.tool.type", a.ToolType)
		add("svc.mcp.server", a.MCPServer)
		if a.ToolHost != "" {
			kv = append(kv, serverAddress.String(a.ToolHost))
		}
	}
	return kv
}

func traceIDOf(runID string) trace.TraceID {
	var t trace.TraceID
	b, _ := hex.DecodeString(TraceID(runID))
	copy(t[:], b)
	return t
}

func spanIDOf(id string) trace.SpanID {
	var s trace.SpanID
	b, _ := hex.DecodeString(id)
	copy(s[:], b)
	return s
}

// contextIDs hands the SDK the ids stored in the context by Export, so exported spans keep
// the ids of the persisted trace; it falls back to random ids for any other use.
type contextIDs struct{}

type idsKey struct{}

type fixedIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

func (contextIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if ids, ok := ctx.Value(idsKey{}).(fixedIDs); ok {
		return ids.trace, ids.span
	}
	var t trace.TraceID
	_, _ = rand.Read(t[:])
	return t, randomSpanID()
}

func (contextIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if ids, ok := ctx.Value(idsKey{}).(fixedIDs); ok {
		return ids.span
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}

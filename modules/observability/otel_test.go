package observability

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a minimal OTLP/HTTP traces endpoint collecting what it is sent.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[string]string // resource attributes
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.ResourceSpans {
		if r.attrs == nil {
			r.attrs = map[string]string{}
		}
		for _, kv := range rs.GetResource().GetAttributes() {
			r.attrs[kv.Key] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrMap(sp *tracepb.Span) map[string]any {
	m := map[string]any{}
	for _, kv := range sp.Attributes {
		switch v := kv.GetValue().Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		}
	}
	return m
}

func TestOTLPExportReceived(t *testing.T) {
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	ctx := context.Background()
	exp, err := NewOTLPExporter(ctx, srv.URL, "test-version")
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(ctx)

	db := dbtest.Open(t, database.SQLite)
	e := newEnv(t, db, envOptions{recorder: RecorderOptions{Exporter: exp}})
	e.run(t, RunInfo{RunID: "r_otel", AgentID: "triage"}, branchingIR, map[string]any{"kind": "bug", "title": "t"})
	if err := e.rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := exp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	if recv.attrs["service.name"] != "svc" || recv.attrs["service.version"] != "test-version" {
		t.Fatalf("resource: %v", recv.attrs)
	}
	tr, err := e.svc.Trace(ctx, "r_otel")
	if err != nil {
		t.Fatal(err)
	}
	if len(recv.spans) != tr.SpanCount {
		t.Fatalf("received %d spans, trace has %d", len(recv.spans), tr.SpanCount)
	}
	byName := map[string]*tracepb.Span{}
	for _, sp := range recv.spans {
		if hex.EncodeToString(sp.TraceId) != TraceID("r_otel") {
			t.Fatalf("trace id %x", sp.TraceId)
		}
		byName[sp.Name] = sp
	}
	call := byName["chat fake-model"]
	if call == nil {
		t.Fatalf("no model-call span among %v", keys(byName))
	}
	a := attrMap(call)
	if a["gen_ai.operation.name"] != "chat" || a["gen_ai.request.model"] != "fake-model" || a["gen_ai.usage.input_tokens"] != int64(12) || a["gen_ai.usage.output_tokens"] != int64(5) {
		t.Fatalf("GenAI attributes: %v", a)
	}
	if call.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Fatalf("call kind %v", call.Kind)
	}
	draft := byName["llm draft"]
	if draft == nil || hex.EncodeToString(call.ParentSpanId) != hex.EncodeToString(draft.SpanId) || hex.EncodeToString(draft.SpanId) != SpanID("r_otel", "draft") {
		t.Fatalf("model call parent: %+v / %+v", call, draft)
	}
	root := byName["run triage"]
	if root == nil || len(root.ParentSpanId) != 0 || root.Status.GetCode() != tracepb.Status_STATUS_CODE_OK {
		t.Fatalf("run span: %+v", root)
	}
	if hex.EncodeToString(draft.ParentSpanId) != hex.EncodeToString(root.SpanId) {
		t.Fatal("node span not under the run span")
	}
}

func keys(m map[string]*tracepb.Span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestOTLPTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":          "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":         "http://127.0.0.1:4318/v1/traces",
		"https://otel.example/v1/traces": "https://otel.example/v1/traces",
		"https://otel.example/prefix":    "https://otel.example/prefix/v1/traces",
	} {
		if got, err := OTLPTracesURL(in); err != nil || got != want {
			t.Fatalf("%s: %s %v", in, got, err)
		}
	}
	for _, bad := range []string{"127.0.0.1:4318", "grpc://x:4317", "http://"} {
		if _, err := OTLPTracesURL(bad); err == nil {
			t.Fatalf("%s accepted", bad)
		}
	}
}

package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/svc-dev/svc/platform/client"
)

// upstream is a scripted OpenAI-compatible /v1/chat/completions speaking SSE. Each request
// gets the next script; bodies are recorded.
type upstream struct {
	mu      sync.Mutex
	scripts []func(w http.ResponseWriter)
	bodies  []map[string]any
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	script := u.scripts[0]
	if len(u.scripts) > 1 {
		u.scripts = u.scripts[1:]
	}
	u.mu.Unlock()
	script(w)
}

// sse writes the content and reasoning pieces as chunks, then a finish reason, usage and [DONE].
func sse(pieces []string, finish string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, p := range pieces {
			delta := map[string]any{"content": p}
			if r, isReasoning := strings.CutPrefix(p, "think:"); isReasoning {
				delta = map[string]any{"reasoning_content": r}
			}
			raw, _ := json.Marshal(map[string]any{"object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}})
			fmt.Fprintf(w, "data: %s\n\n", raw)
			fl.Flush()
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}]}\n\n", finish)
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":4,\"total_tokens\":15}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

func errorAnswer(status int, code string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"%s happened","type":"invalid_request_error","code":%q}}`, code, code)
	}
}

func llmSetup(t *testing.T, scripts ...func(w http.ResponseWriter)) (*Executor, *upstream) {
	t.Helper()
	up := &upstream{scripts: scripts}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	return New(Deps{Models: client.NewInference(srv.URL, srv.Client())}), up
}

const llmIR = `{"nodes":[
  {"id":"ask","kind":"llm","model":"chat-small","system":"You are terse.","prompt":"Summarise: $in.in.text","params":{"temperature":0.1,"maxTokens":64,"topP":0.9,"stop":"END","presencePenalty":0.5}},
  {"id":"out","kind":"output","value":"$in.in.text"}],
  "edges":[{"source":"ask","target":"out"}]}`

func TestLLMStreamsDeltasAndReasoning(t *testing.T) {
	e, up := llmSetup(t, sse([]string{"think:hmm", "think:...", "Hel", "lo"}, "stop"))
	rec := &recorder{}
	res := runG(t, e, mustGraph(t, llmIR), mustJSON(t, `{"text":"long story"}`), rec, nil)
	wantOutput(t, res, `"Hello"`)

	var stream []string
	for _, ev := range rec.all() {
		switch ev.Type {
		case EventDelta:
			stream = append(stream, "d:"+ev.Text)
		case EventReasoning:
			stream = append(stream, "r:"+ev.Text)
		}
	}
	if strings.Join(stream, ",") != "r:hmm,r:...,d:Hel,d:lo" {
		t.Fatalf("stream %v", stream)
	}
	fin := rec.of(EventNodeFinished, "ask")
	if len(fin) != 1 {
		t.Fatalf("finished %+v", fin)
	}
	if got := asJSON(fin[0].Output["out"]); got != `{"finishReason":"stop","reasoning":"hmm...","text":"Hello","usage":{"completionTokens":4,"promptTokens":11,"totalTokens":15}}` {
		t.Fatalf("llm output %s", got)
	}
	if a := fin[0].Attr; a.Model != "chat-small" || a.TokensIn != 11 || a.TokensOut != 4 {
		t.Fatalf("attribution %+v", a)
	}
	body := up.bodies[0]
	msgs := asJSON(body["messages"])
	if msgs != `[{"content":"You are terse.","role":"system"},{"content":"Summarise: long story","role":"user"}]` {
		t.Fatalf("messages %s", msgs)
	}
	if body["model"] != "chat-small" || body["max_tokens"] != float64(64) || body["temperature"] != 0.1 || body["top_p"] != 0.9 ||
		asJSON(body["stop"]) != `["END"]` || body["presence_penalty"] != 0.5 || body["stream"] != true {
		t.Fatalf("request body %v", body)
	}
}

func TestLLMJSONOutput(t *testing.T) {
	e, up := llmSetup(t, sse([]string{"```json\n{\"label\":", "\"bug\"}\n```"}, "stop"))
	g := mustGraph(t, `{"nodes":[{"id":"c","kind":"llm","model":"m","messages":[{"role":"user","content":"classify $in.in"}],"responseFormat":"json"},{"id":"o","kind":"output","value":"$in.in.json.label"}],"edges":[{"source":"c","target":"o"}]}`)
	wantOutput(t, runG(t, e, g, "it crashes", nil, nil), `"bug"`)
	if asJSON(up.bodies[0]["response_format"]) != `{"type":"json_object"}` || asJSON(up.bodies[0]["messages"]) != `[{"content":"classify it crashes","role":"user"}]` {
		t.Fatalf("body %v", up.bodies[0])
	}
}

func TestLLMInvalidJSONFailsNode(t *testing.T) {
	e, _ := llmSetup(t, sse([]string{"not json"}, "stop"))
	g := mustGraph(t, `{"nodes":[{"id":"c","kind":"llm","model":"m","prompt":"x","responseFormat":"json"},{"id":"o","kind":"output"}],"edges":[{"source":"c","target":"o"}]}`)
	res := runG(t, e, g, nil, nil, nil)
	if res.Status != StatusCompleted || res.HasOutput || !strings.Contains(res.Note, "invalid_json_output") {
		t.Fatalf("%+v", res)
	}
}

func TestLLMFinishLengthNotes(t *testing.T) {
	e, _ := llmSetup(t, sse([]string{"think:long thought", "Par"}, "length"))
	res := runG(t, e, mustGraph(t, llmIR), mustJSON(t, `{"text":"x"}`), nil, nil)
	wantOutput(t, res, `"Par"`)
	if !strings.Contains(res.Note, "finish_reason=length") {
		t.Fatalf("note %q", res.Note)
	}
}

func TestLLMModelErrorsCompleteWithNote(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{{404, "model_not_found"}, {503, "engine_unavailable"}, {503, "no_capacity"}, {502, "credential_error"}} {
		t.Run(tc.code, func(t *testing.T) {
			e, _ := llmSetup(t, errorAnswer(tc.status, tc.code))
			rec := &recorder{}
			res := runG(t, e, mustGraph(t, llmIR), mustJSON(t, `{"text":"x"}`), rec, nil)
			if res.Status != StatusCompleted || res.HasOutput {
				t.Fatalf("%+v", res)
			}
			if !strings.Contains(res.Note, `llm node "ask" failed: `+tc.code) {
				t.Fatalf("note %q", res.Note)
			}
			fin := rec.of(EventNodeFinished, "ask")
			if len(fin) != 1 || fin[0].Status != NodeFailed || fin[0].Error.Code != tc.code || fin[0].Error.Status != tc.status {
				t.Fatalf("event %+v", fin)
			}
			if rec.statusOf()["out"] != EventNodeSkipped {
				t.Fatalf("downstream not skipped")
			}
		})
	}
}

func TestLLMWithoutModelsDep(t *testing.T) {
	res := runG(t, New(Deps{}), mustGraph(t, llmIR), mustJSON(t, `{"text":"x"}`), nil, nil)
	if res.Status != StatusCompleted || !strings.Contains(res.Note, "inference_unavailable") {
		t.Fatalf("%+v", res)
	}
}

func TestLLMPromptTemplateError(t *testing.T) {
	e, _ := llmSetup(t, sse([]string{"x"}, "stop"))
	wantCode(t, runG(t, e, mustGraph(t, llmIR), mustJSON(t, `{}`), nil, nil), "template_error", "ask")
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{"topK": "top_k", "seed": "seed", "repeat_penalty": "repeat_penalty", "frequencyPenalty": "frequency_penalty"} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

// The inference client is the production ModelClient.
var _ ModelClient = (*client.Inference)(nil)

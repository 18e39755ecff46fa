package runs_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/runs"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
)

const greeter = `{"id":"greeter","nodes":[{"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name}"},{"id":"out","kind":"output","value":"$in.in.greeting"}],"edges":[{"source":"shape","target":"out"}]}`

const triage = `{"id":"triage","nodes":[{"id":"route","kind":"router","select":"$in.in.kind","handles":["bug","question"]},{"id":"eng","kind":"transform","expr":"{queue: \"eng\", title: $in.in.title}"},{"id":"support","kind":"transform","expr":"{queue: \"support\", title: $in.in.title}"},{"id":"out","kind":"output"}],"edges":[{"source":"route","sourcePort":"bug","target":"eng"},{"source":"route","sourcePort":"question","target":"support"},{"source":"eng","target":"out"},{"source":"support","target":"out"}]}`

// twoLLM has an intermediate llm node (draft) and an answer node (final): only final's
// tokens are answer deltas.
const twoLLM = `{"nodes":[{"id":"draft","kind":"llm","model":"chat","prompt":"draft $in.in.topic"},{"id":"final","kind":"llm","model":"thinker","prompt":"polish $in.in.text"},{"id":"out","kind":"output","value":"$in.in.text"}],"edges":[{"source":"draft","target":"final"},{"source":"final","target":"out"}]}`

const humanIR = `{"id":"approve","nodes":[{"id":"ask","kind":"human","prompt":"ok?"},{"id":"out","kind":"output"}],"edges":[{"source":"ask","target":"out"}]}`

func TestPromptRunStream(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		r := b.srv.Do("POST", "/runs", map[string]any{"input": "hello there", "model": "chat"})
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("stream: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
		}
		id := r.Header.Get("X-Run-Id")
		frames := parseSSE(t, string(r.Body))
		// Exact first and last frames, as IR.md shows them.
		if frames[0].event != "run" || frames[0].data != `{"runId":"`+id+`","status":"streaming"}` {
			t.Fatalf("first frame %+v", frames[0])
		}
		n := len(frames)
		if frames[n-1].event != "" || frames[n-1].data != "[DONE]" {
			t.Fatalf("last frame %+v", frames[n-1])
		}
		if frames[n-2].event != "run" || frames[n-2].data != `{"runId":"`+id+`","status":"completed","output":"echo: hello there"}` {
			t.Fatalf("final frame %+v", frames[n-2])
		}
		var text strings.Builder
		for _, f := range frames[1 : n-2] {
			if f.event != "delta" {
				t.Fatalf("unexpected frame %+v", f)
			}
			m := f.json(t)
			if m["runId"] != id || m["nodeId"] != "llm" || len(m) != 3 {
				t.Fatalf("delta frame %s", f.data)
			}
			text.WriteString(m["text"].(string))
		}
		if text.String() != "echo: hello there" {
			t.Fatalf("deltas spell %q", text.String())
		}
		rec := b.srv.Do("GET", "/runs/"+id, nil).Map(t)
		if rec["status"] != "completed" || rec["output"] != "echo: hello there" || rec["input"] != "hello there" ||
			rec["kind"] != "prompt" || rec["model"] != "chat" || rec["completed_at"] == nil || rec["error"] != nil {
			t.Fatalf("record %v", rec)
		}
		// The upstream saw the provider model and the prompt as the user message.
		msgs := b.up.last()["messages"].([]any)
		if len(msgs) != 1 || msgs[0].(map[string]any)["content"] != "hello there" || b.up.last()["model"] != "echo" {
			t.Fatalf("upstream request %v", b.up.last())
		}
	})
}

func TestPromptRunImmediateReasoningAndErrors(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		// Immediate form.
		r := b.srv.Do("POST", "/runs", map[string]any{"input": "hi", "model": "chat", "stream": false})
		if r.Status != 200 {
			t.Fatalf("immediate: %d %s", r.Status, r.Body)
		}
		m := r.Map(t)
		if m["status"] != "completed" || m["output"] != "echo: hi" || !strings.HasPrefix(m["runId"].(string), "run_") || len(m) != 3 {
			t.Fatalf("immediate body %s", r.Body)
		}

		// Reasoning frames stay out of the output.
		r = b.srv.Do("POST", "/runs", map[string]any{"input": "why", "model": "thinker"})
		frames := parseSSE(t, string(r.Body))
		var reasoning, deltas string
		for _, f := range frames {
			switch f.event {
			case "reasoning":
				reasoning += f.json(t)["text"].(string)
			case "delta":
				deltas += f.json(t)["text"].(string)
			}
		}
		if reasoning != "pondering" || deltas != "echo: why" {
			t.Fatalf("reasoning %q deltas %q", reasoning, deltas)
		}
		if final := frames[len(frames)-2].json(t); final["output"] != "echo: why" {
			t.Fatalf("final %v", final)
		}

		// Params: snake_case aliases reach the wire; bad values are 400 and create nothing.
		r = b.srv.Do("POST", "/runs", map[string]any{"input": "p", "model": "chat", "stream": false,
			"params": map[string]any{"temperature": 0.5, "max_tokens": 7, "top_p": 0.9}})
		if r.Status != 200 {
			t.Fatalf("params: %d %s", r.Status, r.Body)
		}
		last := b.up.last()
		if last["temperature"] != 0.5 || last["max_tokens"] != float64(7) || last["top_p"] != 0.9 {
			t.Fatalf("upstream params %v", last)
		}
		before := countRuns(t, db)
		for name, body := range map[string]any{
			"no model":          map[string]any{"input": "x"},
			"blank input":       map[string]any{"input": "  ", "model": "chat"},
			"input not string":  map[string]any{"input": map[string]any{"a": 1}, "model": "chat"},
			"temperature range": map[string]any{"input": "x", "model": "chat", "params": map[string]any{"temperature": 5}},
			"unknown param":     map[string]any{"input": "x", "model": "chat", "params": map[string]any{"bogus": 1}},
			"params not object": map[string]any{"input": "x", "model": "chat", "params": []int{1}},
			"both spellings":    map[string]any{"input": "x", "model": "chat", "params": map[string]any{"maxTokens": 1, "max_tokens": 2}},
			"unknown field":     map[string]any{"input": "x", "model": "chat", "modle": "x"},
		} {
			if r := b.srv.Do("POST", "/runs", body); r.Status != 400 || r.ErrorCode() != "invalid_request" {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
			}
		}
		// Unregistered model (an engine name, say): 404 model_not_found from the inference plane.
		if r := b.srv.Do("POST", "/runs", map[string]any{"input": "x", "model": "llama-server"}); r.Status != 404 || r.ErrorCode() != "model_not_found" {
			t.Fatalf("unknown model: %d %s", r.Status, r.Body)
		}
		if r := b.srv.Do("POST", "/runs", map[string]any{"input": "x", "model": "chat", "session_id": "nope"}); r.Status != 404 || r.ErrorCode() != "session_not_found" {
			t.Fatalf("unknown session: %d %s", r.Status, r.Body)
		}
		if n := countRuns(t, db); n != before {
			t.Fatalf("rejected requests created %d runs", n-before)
		}

		// A model call that fails fails the prompt run, with the inference plane's code.
		r = b.srv.Do("POST", "/runs", map[string]any{"input": "x", "model": "broken", "stream": false})
		m = r.Map(t)
		if r.Status != 200 || m["status"] != "failed" || m["error"].(map[string]any)["code"] != "upstream_error" {
			t.Fatalf("broken model: %d %s", r.Status, r.Body)
		}
		rec := b.srv.Do("GET", "/runs/"+m["runId"].(string), nil).Map(t)
		if rec["status"] != "failed" || rec["error"].(map[string]any)["code"] != "upstream_error" {
			t.Fatalf("broken record %v", rec)
		}
		r = b.srv.Do("POST", "/runs", map[string]any{"input": "x", "model": "broken"})
		frames = parseSSE(t, string(r.Body))
		final := frames[len(frames)-2].json(t)
		if final["status"] != "failed" || final["error"].(map[string]any)["code"] != "upstream_error" || frames[len(frames)-1].data != "[DONE]" {
			t.Fatalf("broken stream %s", r.Body)
		}
	})
}

func TestSessionHistory(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		if r := b.srv.Do("POST", "/sessions", map[string]any{"id": "s1"}); r.Status != 201 {
			t.Fatalf("session: %d %s", r.Status, r.Body)
		}
		b.srv.Do("POST", "/runs", map[string]any{"input": "first $in.in.prompt", "model": "chat", "session_id": "s1", "stream": false})
		r := b.srv.Do("POST", "/runs", map[string]any{"input": "second", "model": "chat", "session_id": "s1"})
		if r.Status != 200 {
			t.Fatalf("second: %d %s", r.Status, r.Body)
		}
		// The second request carried the first turn as history, verbatim (a token-looking
		// text is not interpolated).
		msgs := b.up.last()["messages"].([]any)
		want := [][2]string{{"user", "first $in.in.prompt"}, {"assistant", "echo: first $in.in.prompt"}, {"user", "second"}}
		if len(msgs) != len(want) {
			t.Fatalf("messages %v", msgs)
		}
		for i, w := range want {
			m := msgs[i].(map[string]any)
			if m["role"] != w[0] || m["content"] != w[1] {
				t.Fatalf("message %d = %v, want %v", i, m, w)
			}
		}
		s := b.srv.Do("GET", "/sessions/s1", nil).Map(t)
		if s["turns"] != float64(2) {
			t.Fatalf("session %v", s)
		}
		ms := s["messages"].([]any)
		if ms[3].(map[string]any)["content"] != "echo: second" {
			t.Fatalf("messages %v", ms)
		}
		// Filter by session; then delete the session: its runs stay, detached.
		var page runs.Page
		b.srv.Do("GET", "/runs?session_id=s1", nil).JSON(t, &page)
		if len(page.Runs) != 2 {
			t.Fatalf("runs of s1: %d", len(page.Runs))
		}
		if r := b.srv.Do("DELETE", "/sessions/s1", nil); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		for _, run := range page.Runs {
			rec := b.srv.Do("GET", "/runs/"+run.ID, nil).Map(t)
			if rec["session_id"] != nil || rec["status"] != "completed" {
				t.Fatalf("run after session delete: %v", rec)
			}
		}
		// Graph runs with a session append the turn (input and output as text).
		b.srv.Do("POST", "/sessions", map[string]any{"id": "s2"})
		r = b.srv.Do("POST", "/graphs/runs", map[string]any{"ir": json.RawMessage(greeter), "input": map[string]any{"name": "Ada"}, "session_id": "s2", "stream": false})
		if r.Status != 200 {
			t.Fatalf("graph with session: %d %s", r.Status, r.Body)
		}
		s = b.srv.Do("GET", "/sessions/s2", nil).Map(t)
		ms = s["messages"].([]any)
		if len(ms) != 2 || ms[0].(map[string]any)["content"] != `{"name":"Ada"}` || ms[1].(map[string]any)["content"] != "Hello, Ada" {
			t.Fatalf("graph turn %v", ms)
		}
	})
}

func TestGraphRuns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		r := b.srv.Do("POST", "/graphs/runs", map[string]any{"ir": json.RawMessage(greeter), "input": map[string]any{"name": "Ada"}, "stream": false})
		if r.Status != 200 || r.Map(t)["output"] != "Hello, Ada" {
			t.Fatalf("greeter: %d %s", r.Status, r.Body)
		}
		r = b.srv.Do("POST", "/graphs/runs", map[string]any{"ir": json.RawMessage(triage), "input": map[string]any{"kind": "bug", "title": "crash"}, "stream": false})
		if out, _ := json.Marshal(r.Map(t)["output"]); string(out) != `{"queue":"eng","title":"crash"}` {
			t.Fatalf("triage: %d %s", r.Status, r.Body)
		}
		// Streamed: a graph without llm nodes streams only status frames.
		r = b.srv.Do("POST", "/graphs/runs", map[string]any{"ir": json.RawMessage(greeter), "input": map[string]any{"name": "Bo"}})
		frames := parseSSE(t, string(r.Body))
		id := r.Header.Get("X-Run-Id")
		if len(frames) != 3 || frames[1].data != `{"runId":"`+id+`","status":"completed","output":"Hello, Bo"}` {
			t.Fatalf("greeter stream %q", r.Body)
		}

		// Run-definition failures: 422 with the run id; the run is recorded failed.
		for _, tc := range []struct {
			ir, code string
			input    any
		}{
			{greeter, "transform_error", map[string]any{}},
			{triage, "router_error", map[string]any{"kind": "praise", "title": "thanks"}},
			{`{"nodes":[{"id":"out","kind":"output","value":"$in.in.missing"}],"edges":[]}`, "template_error", map[string]any{"a": 1}},
		} {
			r := b.srv.Do("POST", "/graphs/runs", map[string]any{"ir": json.RawMessage(tc.ir), "input": tc.input, "stream": false})
			if r.Status != 422 || r.ErrorCode() != tc.code {
				t.Fatalf("%s: %d %s", tc.code, r.Status, r.Body)
			}
			var env struct {
				Error struct {
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			r.JSON(t, &env)
			runID, _ := env.Error.Details["runId"].(string)
			rec := b.srv.Do("GET", "/runs/"+runID, nil).Map(t)
			if rec["status"] != "failed" || rec["error"].(map[string]any)["code"] != tc.code || rec["kind"] != "graph" {
				t.Fatalf("%s record %v", tc.code, rec)
			}
			// The same failure streamed ends with a failed run frame.
			r = b.srv.Do("POST", "/graphs/runs", map[string]any{"ir": json.RawMessage(tc.ir), "input": tc.input})
			frames := parseSSE(t, string(r.Body))
			final := frames[len(frames)-2].json(t)
			if final["status"] != "failed" || final["error"].(map[string]any)["code"] != tc.code || final["error"].(map[string]any)["message"] == "" {
				t.Fatalf("%s stream %s", tc.code, r.Body)
			}
		}

		// Invalid IR: 400 invalid_ir with every problem, and no run row.
		before := countRuns(t, db)
		r = b.srv.Do("POST", "/graphs/runs", map[string]any{"ir": map[string]any{"nodes": []any{map[string]any{"id": "a", "kind": "nope"}}, "edges": []any{map[string]any{"source": "a", "target": "zz"}}}})
		if r.Status != 400 || r.ErrorCode() != "invalid_ir" {
			t.Fatalf("invalid ir: %d %s", r.Status, r.Body)
		}
		var env struct {
			Error struct {
				Details struct {
					Problems []map[string]any `json:"problems"`
				} `json:"details"`
			} `json:"error"`
		}
		r.JSON(t, &env)
		if len(env.Error.Details.Problems) < 2 {
			t.Fatalf("problems %s", r.Body)
		}
		for _, body := range []any{
			map[string]any{"input": map[string]any{}},
			map[string]any{"ir": "not an object"},
		} {
			if r := b.srv.Do("POST", "/graphs/runs", body); r.Status != 400 || r.ErrorCode() != "invalid_ir" {
				t.Fatalf("ir %v: %d %s", body, r.Status, r.Body)
			}
		}
		if r := b.srv.Do("POST", "/graphs/runs", map[string]any{"ir": json.RawMessage(humanIR)}); r.Status != 400 || r.ErrorCode() != "durable_required" {
			t.Fatalf("human graph: %d %s", r.Status, r.Body)
		}
		if r := b.srv.Do("POST", "/graphs/runs", map[string]any{"ir": json.RawMessage(greeter), "session_id": "ghost"}); r.Status != 404 || r.ErrorCode() != "session_not_found" {
			t.Fatalf("ghost session: %d %s", r.Status, r.Body)
		}
		if r := b.srv.Do("POST", "/graphs/runs", `{"ir":`+greeter+`,"input":{"name":"x"}} trailing`); r.Status != 400 || r.ErrorCode() != "invalid_request" {
			t.Fatalf("trailing data: %d %s", r.Status, r.Body)
		}
		if n := countRuns(t, db); n != before {
			t.Fatalf("rejected graph runs created %d rows", n-before)
		}

		// Only the llm node that feeds the output streams answer tokens.
		r = b.srv.Do("POST", "/graphs/runs", map[string]any{"ir": json.RawMessage(twoLLM), "input": map[string]any{"topic": "cats"}})
		frames = parseSSE(t, string(r.Body))
		var deltas, reasoning string
		for _, f := range frames {
			if f.event == "delta" || f.event == "reasoning" {
				m := f.json(t)
				if m["nodeId"] != "final" {
					t.Fatalf("tokens of %v streamed", m["nodeId"])
				}
				if f.event == "delta" {
					deltas += m["text"].(string)
				} else {
					reasoning += m["text"].(string)
				}
			}
		}
		if deltas != "echo: polish echo: draft cats" || reasoning != "pondering" {
			t.Fatalf("deltas %q reasoning %q", deltas, reasoning)
		}
	})
}

func TestAgentRunsAndInvoke(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{token: "s3cret-token"})
		v1 := b.agents.publish(t, "greeter", "1", greeter)
		v2 := b.agents.publish(t, "greeter", "2", strings.Replace(greeter, `Hello, `, `Hi, `, 1))
		b.agents.publish(t, "approve", "1", humanIR)
		in := map[string]any{"name": "Ada"}

		check := func(body map[string]any, want, version, hash string) {
			t.Helper()
			body["input"], body["stream"] = in, false
			r := b.srv.Do("POST", "/agents/greeter/runs", body)
			m := r.Map(t)
			if r.Status != 200 || m["output"] != want {
				t.Fatalf("%v: %d %s", body, r.Status, r.Body)
			}
			rec := b.srv.Do("GET", "/runs/"+m["runId"].(string), nil).Map(t)
			if rec["agent_id"] != "greeter" || rec["version"] != version || rec["content_hash"] != hash || rec["kind"] != "agent" {
				t.Fatalf("record %v", rec)
			}
		}
		check(map[string]any{}, "Hi, Ada", "2", v2.ContentHash)
		check(map[string]any{"version": "1"}, "Hello, Ada", "1", v1.ContentHash)
		check(map[string]any{"content_hash": v1.ContentHash}, "Hello, Ada", "1", v1.ContentHash)
		check(map[string]any{"version": "1", "content_hash": v1.ContentHash}, "Hello, Ada", "1", v1.ContentHash)

		before := countRuns(t, db)
		for _, tc := range []struct {
			path   string
			body   map[string]any
			status int
			code   string
		}{
			{"/agents/greeter/runs", map[string]any{"version": "1", "content_hash": v2.ContentHash}, 400, "invalid_request"},
			{"/agents/greeter/runs", map[string]any{"content_hash": "sha256:abc"}, 400, "invalid_request"},
			{"/agents/greeter/runs", map[string]any{"version": "9"}, 404, "version_not_found"},
			{"/agents/greeter/runs", map[string]any{"content_hash": "sha256:" + strings.Repeat("0", 64)}, 404, "version_not_found"},
			{"/agents/nobody/runs", map[string]any{}, 404, "agent_not_found"},
			{"/agents/approve/runs", map[string]any{}, 400, "durable_required"},
			{"/agents/greeter/runs", map[string]any{"session_id": "ghost"}, 404, "session_not_found"},
			{"/agents/greeter/runs", map[string]any{"versoin": "1"}, 400, "invalid_request"},
		} {
			r := b.srv.Do("POST", tc.path, tc.body)
			if r.Status != tc.status || r.ErrorCode() != tc.code {
				t.Errorf("%s %v: %d %s", tc.path, tc.body, r.Status, r.Body)
			}
		}
		r := b.srv.Do("POST", "/agents/approve/runs", map[string]any{})
		if !strings.Contains(r.Map(t)["error"].(map[string]any)["message"].(string), "/agents/approve/durable-runs") {
			t.Fatalf("durable_required message: %s", r.Body)
		}
		if n := countRuns(t, db); n != before {
			t.Fatalf("rejected agent runs created %d rows", n-before)
		}

		// Invoke: bearer token, immediate by default.
		for _, h := range []string{"", "Authorization: Bearer wrong", "Authorization: s3cret-token", "Authorization: Basic s3cret-token", "Authorization: Bearer "} {
			var hs []string
			if h != "" {
				hs = []string{h}
			}
			r := b.srv.Do("POST", "/agents/greeter/invoke", map[string]any{"input": in}, hs...)
			if r.Status != 401 || r.ErrorCode() != "unauthorized" || strings.Contains(string(r.Body), "s3cret") {
				t.Errorf("invoke with %q: %d %s", h, r.Status, r.Body)
			}
		}
		// Unauthorized callers learn nothing about agents.
		if r := b.srv.Do("POST", "/agents/nobody/invoke", map[string]any{}); r.Status != 401 {
			t.Errorf("invoke unknown agent without token: %d", r.Status)
		}
		r = b.srv.Do("POST", "/agents/greeter/invoke", map[string]any{"input": in}, "Authorization: Bearer s3cret-token")
		if m := r.Map(t); r.Status != 200 || m["output"] != "Hi, Ada" || m["status"] != "completed" {
			t.Fatalf("invoke: %d %s", r.Status, r.Body)
		}
		r = b.srv.Do("POST", "/agents/greeter/invoke", map[string]any{"input": in, "stream": true}, "authorization: bearer s3cret-token")
		if frames := parseSSE(t, string(r.Body)); r.Status != 200 || frames[len(frames)-1].data != "[DONE]" {
			t.Fatalf("invoke stream: %d %s", r.Status, r.Body)
		}
		r = b.srv.Do("POST", "/agents/greeter/invoke", map[string]any{"input": map[string]any{}}, "Authorization: Bearer s3cret-token")
		if r.Status != 422 || r.ErrorCode() != "transform_error" {
			t.Fatalf("invoke failing: %d %s", r.Status, r.Body)
		}
		if r := b.srv.Do("POST", "/agents/nobody/invoke", map[string]any{}, "Authorization: Bearer s3cret-token"); r.Status != 404 {
			t.Fatalf("invoke unknown agent: %d", r.Status)
		}

		// Background runs (triggers): recorded with the trigger id.
		id, err := b.svc.StartAgentRun(t.Context(), runs.AgentRunRequest{AgentID: "greeter", Version: "1", Input: in, TriggerID: "trg_1"})
		if err != nil {
			t.Fatal(err)
		}
		rec := waitRun(t, b.srv, id)
		if rec["output"] != "Hello, Ada" || rec["trigger_id"] != "trg_1" {
			t.Fatalf("background run %v", rec)
		}
		var page runs.Page
		b.srv.Do("GET", "/runs?trigger_id=trg_1", nil).JSON(t, &page)
		if len(page.Runs) != 1 || page.Runs[0].ID != id {
			t.Fatalf("trigger filter %+v", page)
		}
		if _, err := b.svc.StartAgentRun(t.Context(), runs.AgentRunRequest{AgentID: "approve", Version: "1"}); err == nil || !strings.Contains(err.Error(), "durable_required") {
			t.Fatalf("background durable agent: %v", err)
		}

		// Observers saw every run start and end, with its events.
		b.obs.mu.Lock()
		defer b.obs.mu.Unlock()
		out, ok := b.obs.finished[id]
		if !ok || out.Status != "completed" || out.Output != "Hello, Ada" {
			t.Fatalf("observer outcome %+v", out)
		}
		var sawInfo bool
		for _, info := range b.obs.started {
			if info.RunID == id && info.TriggerID == "trg_1" && info.Kind == "agent" && info.AgentID == "greeter" && info.Version == "1" {
				sawInfo = true
			}
		}
		if !sawInfo || len(b.obs.events[id]) < 4 {
			t.Fatalf("observer saw %v, %d events", b.obs.started, len(b.obs.events[id]))
		}
	})
}

func TestInvokeClosedWithoutToken(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		b.agents.publish(t, "greeter", "1", greeter)
		for _, h := range []string{"Authorization: Bearer ", "Authorization: Bearer x"} {
			if r := b.srv.Do("POST", "/agents/greeter/invoke", map[string]any{"input": map[string]any{"name": "a"}}, h); r.Status != 401 || r.ErrorCode() != "unauthorized" {
				t.Fatalf("closed invoke: %d %s", r.Status, r.Body)
			}
		}
	})
}

func TestListRuns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		b.agents.publish(t, "greeter", "1", greeter)
		var ids []string
		for i := range 5 {
			body := map[string]any{"input": map[string]any{"name": "n"}, "stream": false}
			path := "/agents/greeter/runs"
			if i%2 == 1 {
				body["input"] = map[string]any{}
				path = "/graphs/runs"
				body["ir"] = json.RawMessage(greeter)
			}
			r := b.srv.Do("POST", path, body)
			var m map[string]any
			if r.Status == 422 {
				var env struct {
					Error struct {
						Details map[string]any `json:"details"`
					} `json:"error"`
				}
				r.JSON(t, &env)
				ids = append(ids, env.Error.Details["runId"].(string))
				continue
			}
			m = r.Map(t)
			ids = append(ids, m["runId"].(string))
		}
		seen := []string{}
		before := ""
		for range 10 {
			q := "/runs?limit=2"
			if before != "" {
				q += "&before=" + before
			}
			var p runs.Page
			if r := b.srv.Do("GET", q, nil); r.Status != 200 {
				t.Fatalf("list: %d %s", r.Status, r.Body)
			} else {
				r.JSON(t, &p)
			}
			for _, run := range p.Runs {
				seen = append(seen, run.ID)
			}
			if p.Next == "" {
				break
			}
			before = p.Next
		}
		if len(seen) != 5 {
			t.Fatalf("paging saw %v", seen)
		}
		for i := range seen {
			if seen[i] != ids[len(ids)-1-i] {
				t.Fatalf("not newest first: %v vs created %v", seen, ids)
			}
		}
		var p runs.Page
		b.srv.Do("GET", "/runs?agent_id=greeter&status=completed", nil).JSON(t, &p)
		if len(p.Runs) != 3 {
			t.Fatalf("agent+status filter: %d", len(p.Runs))
		}
		b.srv.Do("GET", "/runs?status=failed", nil).JSON(t, &p)
		if len(p.Runs) != 2 || p.Runs[0].Error == nil || p.Runs[0].Error.Code != "transform_error" {
			t.Fatalf("failed filter: %+v", p.Runs)
		}
		for _, q := range []string{"/runs?status=done", "/runs?limit=201", "/runs?limit=x", "/runs?before=abc"} {
			if r := b.srv.Do("GET", q, nil); r.Status != 400 || r.ErrorCode() != "invalid_request" {
				t.Errorf("%s: %d %s", q, r.Status, r.Body)
			}
		}
		if r := b.srv.Do("GET", "/runs/run_nope", nil); r.Status != http.StatusNotFound || r.ErrorCode() != "run_not_found" {
			t.Fatalf("unknown run: %d %s", r.Status, r.Body)
		}
	})
}

package dataplane_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
)

func TestListModels(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	r := b.srv.Do("GET", "/v1/models", nil)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	r.JSON(t, &list)
	if list.Object != "list" || len(list.Data) != 3 {
		t.Fatalf("list = %+v", list)
	}
	ids := []string{list.Data[0].ID, list.Data[1].ID, list.Data[2].ID}
	if strings.Join(ids, ",") != "chat,nocred,open" {
		t.Errorf("ids = %v, want the logical ids sorted", ids)
	}
	if d := list.Data[0]; d.Object != "model" || d.OwnedBy != "svc" || d.Created != 1710000000 {
		t.Errorf("model object = %+v", d)
	}
	if strings.Contains(string(r.Body), "provider-chat-1") {
		t.Errorf("the provider-side name leaks into /v1/models: %s", r.Body)
	}

	r = b.srv.Do("GET", "/v1/models/chat", nil)
	if r.Status != 200 || r.Map(t)["id"] != "chat" {
		t.Errorf("GET /v1/models/chat = %d %s", r.Status, r.Body)
	}
	r = b.srv.Do("GET", "/v1/models/provider-chat-1", nil)
	if r.Status != 404 || r.ErrorCode() != "model_not_found" {
		t.Errorf("GET an unregistered id = %d %s", r.Status, r.Body)
	}
}

func TestChatNonStreamingRewritesOnlyModelAndCap(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	// Unusual but valid formatting: member order, HTML characters, 2.50 and nested
	// whitespace must reach the upstream byte for byte.
	messages := `[{"role":"user","content":[{"type":"text","text":"hi <b>&"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]}]`
	extra := `{"a": [1, 2.50, "\u00e9"]}`
	body := `{"temperature":0.25,"model":"chat","messages":` + messages + `,"max_tokens":5000,"x_custom":` + extra + `}`
	r := b.srv.Do("POST", "/v1/chat/completions", body, "Authorization: Bearer client-key-for-svc")
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	r.JSON(t, &out)
	if out.Object != "chat.completion" || len(out.Choices) != 1 || out.Choices[0].Message.Content != "echo: hi <b>&" {
		t.Fatalf("answer = %s", r.Body)
	}
	got := b.up.Last()
	if got.Path != "/v1/chat/completions" {
		t.Errorf("upstream path = %s", got.Path)
	}
	if got.JSON["model"] != "provider-chat-1" {
		t.Errorf("upstream model = %v, want the provider-side name", got.JSON["model"])
	}
	if a := got.Header.Get("Authorization"); a != "Bearer "+secret {
		t.Errorf("upstream Authorization = %q, want the credential (never the client's key)", a)
	}
	if got.JSON["max_tokens"] != float64(100) {
		t.Errorf("upstream max_tokens = %v, want capped to 100", got.JSON["max_tokens"])
	}
	want := `{"temperature":0.25,"model":"provider-chat-1","messages":` + messages + `,"max_tokens":100,"x_custom":` + extra + `}`
	if string(got.Body) != want {
		t.Errorf("upstream body\n got %s\nwant %s", got.Body, want)
	}
}

func TestMaxTokensCap(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	cases := []struct {
		name, model, fields string
		want                map[string]any // expected values; nil value = absent
	}{
		{"below the cap is kept", "chat", `"max_tokens":50`, map[string]any{"max_tokens": float64(50)}},
		{"absent gets the cap", "chat", ``, map[string]any{"max_tokens": float64(100)}},
		{"null gets the cap", "chat", `"max_tokens":null`, map[string]any{"max_tokens": float64(100)}},
		{"max_completion_tokens is capped", "chat", `"max_completion_tokens":500`, map[string]any{"max_completion_tokens": float64(100), "max_tokens": nil}},
		{"both are capped", "chat", `"max_tokens":101,"max_completion_tokens":7`, map[string]any{"max_tokens": float64(100), "max_completion_tokens": float64(7)}},
		{"no cap, no credential", "open", `"max_tokens":5000`, map[string]any{"max_tokens": float64(5000)}},
		{"no cap leaves absence alone", "open", ``, map[string]any{"max_tokens": nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"` + tc.model + `","messages":[{"role":"user","content":"x"}]`
			if tc.fields != "" {
				body += "," + tc.fields
			}
			body += "}"
			r := b.srv.Do("POST", "/v1/chat/completions", body)
			if r.Status != 200 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			got := b.up.Last()
			for k, v := range tc.want {
				gv, present := got.JSON[k]
				if v == nil && present {
					t.Errorf("%s = %v, want absent", k, gv)
				}
				if v != nil && gv != v {
					t.Errorf("%s = %v, want %v", k, gv, v)
				}
			}
			if tc.model == "open" && got.Header.Get("Authorization") != "" {
				t.Errorf("a model without credentialRef sent Authorization %q", got.Header.Get("Authorization"))
			}
		})
	}
}

// readSSE returns the data payloads of an SSE body.
func readSSE(t *testing.T, body io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func postStream(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestChatStreaming(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	resp := postStream(t, b.srv.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"stream me"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	frames := readSSE(t, resp.Body)
	if len(frames) == 0 || frames[len(frames)-1] != "[DONE]" {
		t.Fatalf("frames = %v, want to end with [DONE]", frames)
	}
	var text strings.Builder
	for _, f := range frames[:len(frames)-1] {
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(f), &ch); err != nil || ch.Object != "chat.completion.chunk" {
			t.Fatalf("frame %q: %v", f, err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if text.String() != "echo: stream me" {
		t.Errorf("streamed text = %q", text.String())
	}
	if b.up.Last().JSON["model"] != "provider-chat-1" {
		t.Errorf("upstream model = %v", b.up.Last().JSON["model"])
	}
}

// TestStreamIsUnbuffered: the upstream sends one chunk and then waits for the test; the
// client must read that chunk before the upstream is allowed to continue.
func TestStreamIsUnbuffered(t *testing.T) {
	gate := make(chan struct{})
	b := setup(t, dataplanetest.Script{ChatGate: gate})
	released := false
	defer func() {
		if !released {
			close(gate)
		}
	}()
	resp := postStream(t, b.srv.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"abcdef"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rd := bufio.NewReader(resp.Body)
	// This read can only finish if the first chunk was forwarded on its own: the upstream
	// is blocked on the gate until we close it below.
	var first string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the first chunk: %v", err)
		}
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			first = d
			break
		}
	}
	if !strings.Contains(first, `"content":"echo: "`) {
		t.Fatalf("first chunk = %s", first)
	}
	close(gate)
	released = true
	rest := readSSE(t, rd)
	if len(rest) != 3 || !strings.Contains(rest[0], `"content":"abcdef"`) || rest[2] != "[DONE]" {
		t.Errorf("rest of the stream = %v", rest)
	}
}

func TestStreamBrokenUpstreamEndsWithErrorEvent(t *testing.T) {
	// The gate is never opened: after the first chunk the upstream stays silent past the
	// timeout, and the client gets an error event in the OpenAI shape.
	gate := make(chan struct{})
	defer close(gate)
	b := setup(t, dataplanetest.Script{ChatGate: gate}, func(o *dataplane.Options) { o.Timeout = 200e6 })
	resp := postStream(t, b.srv.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"abcdef"}]}`)
	frames := readSSE(t, resp.Body)
	if len(frames) != 2 {
		t.Fatalf("frames = %v, want the first chunk and an error event", frames)
	}
	var ev struct {
		Error struct{ Code, Type, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(frames[1]), &ev); err != nil || ev.Error.Code != "upstream_timeout" {
		t.Errorf("last frame = %s", frames[1])
	}
}

func TestEmbeddings(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	for _, input := range []string{`"one text"`, `["a","bb","ccc"]`} {
		r := b.srv.Do("POST", "/v1/embeddings", `{"model":"chat","input":`+input+`}`)
		if r.Status != 200 {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		var out struct {
			Object string `json:"object"`
			Data   []struct {
				Embedding []float64 `json:"embedding"`
			} `json:"data"`
		}
		r.JSON(t, &out)
		var in any
		_ = json.Unmarshal([]byte(input), &in)
		n := 1
		if l, ok := in.([]any); ok {
			n = len(l)
		}
		if out.Object != "list" || len(out.Data) != n || len(out.Data[0].Embedding) != 3 {
			t.Errorf("embeddings of %s = %s", input, r.Body)
		}
		got := b.up.Last()
		if got.Path != "/v1/embeddings" || got.JSON["model"] != "provider-chat-1" || got.Header.Get("Authorization") != "Bearer "+secret {
			t.Errorf("upstream got %s %v %q", got.Path, got.JSON["model"], got.Header.Get("Authorization"))
		}
		if _, capped := got.JSON["max_tokens"]; capped {
			t.Errorf("max_tokens added to an embeddings request")
		}
		if !strings.Contains(string(got.Body), `"input":`+input) {
			t.Errorf("input not passed through: %s", got.Body)
		}
	}
}

func TestSpeech(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	r := b.srv.Do("POST", "/v1/audio/speech", `{"model":"chat","input":"Hello there.","voice":"alloy","response_format":"mp3"}`)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "audio/mpeg" {
		t.Errorf("content type %q, want the upstream's", ct)
	}
	if string(r.Body) != string(dataplanetest.Speech) {
		t.Errorf("audio differs: %d bytes, want %d", len(r.Body), len(dataplanetest.Speech))
	}
	got := b.up.Last()
	if got.JSON["model"] != "provider-chat-1" || got.JSON["voice"] != "alloy" || got.Header.Get("Authorization") != "Bearer "+secret {
		t.Errorf("upstream got %s", got.Body)
	}
}

func TestSpeechFailures(t *testing.T) {
	cases := []struct {
		name   string
		script dataplanetest.Script
	}{
		{"empty audio", dataplanetest.Script{SpeechEmpty: true}},
		{"aborted audio", dataplanetest.Script{SpeechAbort: true}},
		{"engine error", dataplanetest.Script{Fail: map[string]dataplanetest.Failure{"/audio/speech": {Status: 500, Body: `{"error":{"message":"synthesis crashed","type":"server_error"}}`}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, tc.script)
			r := b.srv.Do("POST", "/v1/audio/speech", `{"model":"chat","input":"Hello"}`)
			if r.Status != 502 || r.ErrorCode() != "speech_failed" {
				t.Fatalf("= %d %s, want 502 speech_failed", r.Status, r.Body)
			}
			if !strings.Contains(r.Map(t)["error"].(map[string]any)["message"].(string), "rephras") {
				t.Errorf("message does not suggest rephrasing: %s", r.Body)
			}
		})
	}
}

func TestImages(t *testing.T) {
	for _, asURL := range []bool{false, true} {
		name := "b64 upstream"
		if asURL {
			name = "url upstream"
		}
		t.Run(name, func(t *testing.T) {
			// With URLs the image host requires the model's credential: same origin.
			b := setup(t, dataplanetest.Script{ImagesAsURL: asURL, ImageFetchBearer: secret})
			r := b.srv.Do("POST", "/v1/images/generations", `{"model":"chat","prompt":"a red fox","size":"256x256","n":2,"steps":4}`)
			if r.Status != 200 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			var out struct {
				Created int64            `json:"created"`
				Data    []map[string]any `json:"data"`
			}
			r.JSON(t, &out)
			if out.Created == 0 || len(out.Data) != 2 {
				t.Fatalf("answer = %s", r.Body)
			}
			for _, d := range out.Data {
				raw, err := base64.StdEncoding.DecodeString(d["b64_json"].(string))
				if err != nil || string(raw) != string(dataplanetest.Image) {
					t.Errorf("b64_json does not decode to the image: %v", err)
				}
				if _, ok := d["url"]; ok {
					t.Errorf("url left in the answer: %v", d)
				}
			}
			got := b.up.Requests()[0]
			if got.JSON["model"] != "provider-chat-1" || got.JSON["steps"] != float64(4) || got.JSON["size"] != "256x256" || got.JSON["prompt"] != "a red fox" {
				t.Errorf("upstream got %s", got.Body)
			}
		})
	}
}

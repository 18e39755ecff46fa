package models_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/svc-dev/svc/modules/credentials"
	"github.com/svc-dev/svc/modules/engines"
	"github.com/svc-dev/svc/modules/models"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/openapi"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

type setup struct {
	srv   *testkit.Server
	svc   *models.Service
	creds *credentials.Service
	db    *database.DB
	env   map[string]string
	logs  *bytes.Buffer
}

func newSetup(t *testing.T, db *database.DB) *setup {
	t.Helper()
	env := map[string]string{}
	creds := credentials.New(db, secrets.Ephemeral(), func(k string) string { return env[k] })
	eng := engines.New(engines.Options{MaxResident: 2, LookPath: func(string) (string, error) { return "", errors.New("absent") }})
	svc := models.New(db, eng, creds, models.Options{})
	logs := &bytes.Buffer{}
	srv := testkit.New(t, testkit.Options{LogTo: logs}, models.NewModule(svc), credentials.NewModule(creds), engines.NewModule(eng))
	return &setup{srv: srv, svc: svc, creds: creds, db: db, env: env, logs: logs}
}

func (s *setup) count(t *testing.T) int64 {
	t.Helper()
	var n int64
	if err := s.db.Raw("SELECT COUNT(*) FROM inference_models").Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func hosted(extra map[string]any) map[string]any {
	b := map[string]any{"binding": "hosted-compatible", "baseUrl": "https://api.example.com/v1", "model": "gpt-x"}
	for k, v := range extra {
		if v == nil {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	return b
}

func TestRegistrationValidation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db)
		cases := []struct {
			name, id string
			body     any
			code     string
		}{
			{"id starts with dot", ".x", hosted(nil), "invalid_model_id"},
			{"id too long", strings.Repeat("a", 129), hosted(nil), "invalid_model_id"},
			{"id with space", "a%20b", hosted(nil), "invalid_model_id"},
			{"id with percent", "a%2525", hosted(nil), "invalid_model_id"},
			{"body id differs", "gpt", hosted(map[string]any{"id": "other"}), "invalid_model_id"},
			{"no binding", "gpt", hosted(map[string]any{"binding": nil}), "unknown_binding"},
			{"unknown binding", "gpt", hosted(map[string]any{"binding": "ollama"}), "unknown_binding"},
			{"no base url", "gpt", hosted(map[string]any{"baseUrl": nil}), "invalid_base_url"},
			{"relative base url", "gpt", hosted(map[string]any{"baseUrl": "/v1"}), "invalid_base_url"},
			{"ftp base url", "gpt", hosted(map[string]any{"baseUrl": "ftp://host/v1"}), "invalid_base_url"},
			{"base url with user info", "gpt", hosted(map[string]any{"baseUrl": "https://user:sk-secret@host/v1"}), "invalid_base_url"},
			{"base url with query", "gpt", hosted(map[string]any{"baseUrl": "https://host/v1?key=x"}), "invalid_base_url"},
			{"no model", "gpt", hosted(map[string]any{"model": nil}), "invalid_model"},
			{"blank model", "gpt", hosted(map[string]any{"model": "  "}), "invalid_model"},
			{"pasted key as ref", "gpt", hosted(map[string]any{"credentialRef": "sk-abc123"}), "invalid_credential_ref"},
			{"ref bad name", "gpt", hosted(map[string]any{"credentialRef": "secret://my-key"}), "invalid_credential_ref"},
			{"ref empty name", "gpt", hosted(map[string]any{"credentialRef": "secret://"}), "invalid_credential_ref"},
			{"max tokens zero", "gpt", hosted(map[string]any{"maxTokens": 0}), "invalid_max_tokens"},
			{"max tokens negative", "gpt", hosted(map[string]any{"maxTokens": -5}), "invalid_max_tokens"},
			{"max tokens huge", "gpt", hosted(map[string]any{"maxTokens": 1 << 40}), "invalid_max_tokens"},
			{"max tokens fraction", "gpt", hosted(map[string]any{"maxTokens": 1.5}), "invalid_request"},
			{"unknown modality", "gpt", hosted(map[string]any{"modalities": []string{"chat", "video"}}), "invalid_modality"},
			{"repeated modality", "gpt", hosted(map[string]any{"modalities": []string{"chat", "chat"}}), "invalid_modality"},
			{"unknown field", "gpt", hosted(map[string]any{"apiKey": "sk-x"}), "invalid_request"},
			{"wrong type", "gpt", hosted(map[string]any{"baseUrl": 12}), "invalid_request"},
			{"malformed", "gpt", `{"binding":`, "invalid_request"},
			{"empty body", "gpt", nil, "invalid_request"},
		}
		for _, tc := range cases {
			r := s.srv.Do(http.MethodPut, "/admin/models/"+tc.id, tc.body)
			if r.Status != http.StatusBadRequest || r.ErrorCode() != tc.code {
				t.Errorf("%s: %d %s (want 400 %s)", tc.name, r.Status, r.Body, tc.code)
			}
			if strings.Contains(string(r.Body), "sk-") {
				t.Errorf("%s: the answer echoes a secret-looking value: %s", tc.name, r.Body)
			}
		}
		if n := s.count(t); n != 0 {
			t.Fatalf("bad input stored %d rows", n)
		}
		if strings.Contains(s.logs.String(), "sk-") {
			t.Fatalf("log echoes a secret-looking value")
		}
	})
}

func TestRegisterReplaceGetListDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db)
		r := s.srv.Do(http.MethodPut, "/admin/models/gpt", hosted(map[string]any{"credentialRef": "secret://OPENAI_KEY", "maxTokens": 512, "modalities": []string{"chat"}, "baseUrl": "https://api.example.com/v1/"}))
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		var v struct {
			models.Model
			State string `json:"state"`
		}
		r.JSON(t, &v)
		if v.BaseURL != "https://api.example.com/v1" || v.Revision != 1 || v.State != "remote" || v.MaxTokens != 512 || v.CredentialRef != "secret://OPENAI_KEY" {
			t.Fatalf("created = %+v", v)
		}

		r = s.srv.Do(http.MethodPut, "/admin/models/gpt", hosted(map[string]any{"model": "gpt-y", "id": "gpt"}))
		if r.Status != http.StatusOK {
			t.Fatalf("replace: %d %s", r.Status, r.Body)
		}
		r = s.srv.Do(http.MethodGet, "/admin/models/gpt", nil)
		v.Model, v.State = models.Model{}, ""
		r.JSON(t, &v)
		if r.Status != http.StatusOK || v.Model.Model != "gpt-y" || v.Revision != 2 || v.MaxTokens != 0 || v.CredentialRef != "" {
			t.Fatalf("after replace: %d %s", r.Status, r.Body)
		}

		// Ids with "/" (sent as %2F) and ":".
		if r := s.srv.Do(http.MethodPut, "/admin/models/org%2Fmodel-7b", hosted(nil)); r.Status != http.StatusCreated {
			t.Fatalf("slash id: %d %s", r.Status, r.Body)
		}
		if r := s.srv.Do(http.MethodPut, "/admin/models/qwen2.5:7b", hosted(nil)); r.Status != http.StatusCreated {
			t.Fatalf("colon id: %d %s", r.Status, r.Body)
		}
		r = s.srv.Do(http.MethodGet, "/admin/models/org%2Fmodel-7b", nil)
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"id":"org/model-7b"`) {
			t.Fatalf("get slash id: %d %s", r.Status, r.Body)
		}

		r = s.srv.Do(http.MethodGet, "/admin/models", nil)
		var list struct {
			Models []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"models"`
		}
		r.JSON(t, &list)
		if len(list.Models) != 3 || list.Models[0].ID != "gpt" || list.Models[1].ID != "org/model-7b" || list.Models[2].ID != "qwen2.5:7b" || list.Models[0].State != "remote" {
			t.Fatalf("list = %s", r.Body)
		}

		// Warm and evict are no-ops for hosted models, and say so.
		for _, action := range []string{"warm", "evict"} {
			r = s.srv.Do(http.MethodPost, "/admin/models/qwen2.5:7b:"+action, nil)
			var a models.ActionResult
			r.JSON(t, &a)
			if r.Status != http.StatusOK || a.ID != "qwen2.5:7b" || a.Action != action || a.State != "remote" || !strings.Contains(a.Detail, "no-op") {
				t.Fatalf("%s: %d %s", action, r.Status, r.Body)
			}
		}
		r = s.srv.Do(http.MethodPost, "/admin/models/org%2Fmodel-7b:warm", nil)
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"id":"org/model-7b"`) {
			t.Fatalf("warm slash id: %d %s", r.Status, r.Body)
		}
		for path, code := range map[string]string{
			"/admin/models/gpt:reload": "unknown_action",
			"/admin/models/gpt":        "unknown_action",
			"/admin/models/nope:warm":  "model_not_found",
		} {
			if r := s.srv.Do(http.MethodPost, path, nil); r.Status != http.StatusNotFound || r.ErrorCode() != code {
				t.Errorf("POST %s: %d %s", path, r.Status, r.Body)
			}
		}

		if r := s.srv.Do(http.MethodDelete, "/admin/models/gpt", nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if r := s.srv.Do(http.MethodGet, "/admin/models/gpt", nil); r.Status != http.StatusNotFound || r.ErrorCode() != "model_not_found" {
			t.Fatalf("get deleted: %d %s", r.Status, r.Body)
		}
		if r := s.srv.Do(http.MethodDelete, "/admin/models/gpt", nil); r.Status != http.StatusNotFound || r.ErrorCode() != "model_not_found" {
			t.Fatalf("delete again: %d %s", r.Status, r.Body)
		}
		if n := s.count(t); n != 2 {
			t.Fatalf("%d rows left, want 2", n)
		}
	})
}

func TestResolve(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db)
		ctx := context.Background()
		if _, _, err := s.svc.Put(ctx, "chat", &models.Spec{Binding: models.BindingHostedCompatible, BaseURL: "http://127.0.0.1:9/v1", Model: "m"}); err != nil {
			t.Fatal(err)
		}
		m, err := s.svc.Resolve(ctx, "chat")
		if err != nil || m.Model != "m" || m.BaseURL != "http://127.0.0.1:9/v1" || !m.Supports(models.ModalityEmbeddings) {
			t.Fatalf("resolve: %+v %v", m, err)
		}
		for _, id := range []string{"missing", "llama.cpp", "whisper.cpp", "", "../etc"} {
			_, err := s.svc.Resolve(ctx, id)
			if !errors.Is(err, models.ErrModelNotFound) {
				t.Fatalf("resolve %q: %v", id, err)
			}
			if strings.HasSuffix(id, ".cpp") && !strings.Contains(err.Error(), "logical id") {
				t.Fatalf("no engine-name hint for %q: %v", id, err)
			}
		}
	})
}

func TestOpenAPICoversRoutes(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	s := newSetup(t, db)
	var frags [][]byte
	eng := engines.New(engines.Options{})
	for _, m := range []interface{ OpenAPI() []byte }{models.NewModule(s.svc), credentials.NewModule(s.creds), engines.NewModule(eng)} {
		frags = append(frags, m.OpenAPI())
	}
	doc, err := openapi.Build("t", "v", frags...)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := openapi.Missing(s.srv.Echo, doc)
	if err != nil || len(missing) > 0 {
		t.Fatalf("routes missing from the fragments: %v %v", missing, err)
	}
	for _, p := range []string{"/admin/models/{id}:warm", "/admin/models/{id}:evict", "/admin/models/{id}/capabilities"} {
		if !bytes.Contains(doc, []byte(`"`+p+`"`)) {
			t.Fatalf("%s not documented", p)
		}
	}
}

// upstream is a scripted OpenAI-compatible server that records what it receives.
type upstream struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	auth     []string
	// behaviour
	vision    bool
	tools     bool
	reasoning bool
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{tools: true, reasoning: true}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		u.mu.Lock()
		u.requests = append(u.requests, r.Method+" "+r.URL.Path)
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"other","object":"model","max_model_len":4096},{"id":"provider-model","object":"model","created":1700000000,"owned_by":"vllm","max_model_len":32768}]}`))
		case "/v1/chat/completions":
			if body["model"] != "provider-model" {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":{"message":"model not found","type":"invalid_request_error","code":"model_not_found"}}`))
				return
			}
			msgs, _ := body["messages"].([]any)
			first, _ := msgs[0].(map[string]any)
			if _, isParts := first["content"].([]any); isParts && !u.vision {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":{"message":"image input is not supported","type":"invalid_request_error","param":null,"code":null}}`))
				return
			}
			if _, hasTools := body["tools"]; hasTools {
				if !u.tools {
					w.WriteHeader(http.StatusBadRequest)
					_, _ = w.Write([]byte(`{"error":{"message":"tools are not supported","type":"invalid_request_error","param":"tools","code":null}}`))
					return
				}
				_, _ = w.Write([]byte(`{"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"provider-model","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`))
				return
			}
			rc := ""
			if u.reasoning {
				rc = `,"reasoning_content":"The user wants ok."`
			}
			_, _ = w.Write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"provider-model","choices":[{"index":0,"message":{"role":"assistant","content":"ok"` + rc + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`))
		case "/v1/embeddings":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"provider-model","usage":{"prompt_tokens":1,"total_tokens":1}}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.requests)
}

func TestCapabilitiesProbe(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db)
		up := newUpstream(t)
		const key = "sk-probe-SECRET-value-123"
		if r := s.srv.Do(http.MethodPut, "/admin/credentials/UP_KEY", map[string]string{"value": key}); r.Status != http.StatusCreated {
			t.Fatalf("credential: %d %s", r.Status, r.Body)
		}
		if r := s.srv.Do(http.MethodPut, "/admin/models/smart", map[string]any{"binding": "hosted-compatible", "baseUrl": up.URL + "/v1", "model": "provider-model", "credentialRef": "secret://UP_KEY"}); r.Status != http.StatusCreated {
			t.Fatalf("register: %d %s", r.Status, r.Body)
		}
		r := s.srv.Do(http.MethodGet, "/admin/models/smart/capabilities", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("probe: %d %s", r.Status, r.Body)
		}
		var c models.Capabilities
		r.JSON(t, &c)
		if c.ToolCalling == nil || !*c.ToolCalling || c.Vision == nil || *c.Vision || c.Reasoning == nil || !*c.Reasoning {
			t.Fatalf("caps = %s", r.Body)
		}
		if c.MaxContext == nil || *c.MaxContext != 32768 {
			t.Fatalf("maxContext = %v", c.MaxContext)
		}
		if c.Cached || c.Method != "active-probe" || strings.Join(modalityStrings(c.Modalities), ",") != "chat,embeddings" || c.Revision != 1 {
			t.Fatalf("caps = %s", r.Body)
		}
		if strings.Contains(string(r.Body), key) || strings.Contains(s.logs.String(), key) {
			t.Fatalf("the credential leaked")
		}
		up.mu.Lock()
		for i, a := range up.auth {
			if a != "Bearer "+key {
				t.Fatalf("request %s carried Authorization %q", up.requests[i], a)
			}
		}
		up.mu.Unlock()

		// Cached: no upstream traffic.
		n := up.calls()
		r = s.srv.Do(http.MethodGet, "/admin/models/smart/capabilities", nil)
		r.JSON(t, &c)
		if !c.Cached || up.calls() != n {
			t.Fatalf("second call not cached: %s (%d → %d upstream calls)", r.Body, n, up.calls())
		}
		// refresh=true probes again.
		up.vision = true
		r = s.srv.Do(http.MethodGet, "/admin/models/smart/capabilities?refresh=true", nil)
		r.JSON(t, &c)
		if c.Cached || up.calls() == n || c.Vision == nil || !*c.Vision {
			t.Fatalf("refresh: %s", r.Body)
		}
		if r := s.srv.Do(http.MethodGet, "/admin/models/smart/capabilities?refresh=maybe", nil); r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_request" {
			t.Fatalf("bad refresh: %d %s", r.Status, r.Body)
		}

		// Replacing the model invalidates the cache; registered modalities are reported as is
		// and tools refused with a 400 read as unsupported.
		up.tools, up.reasoning = false, false
		if r := s.srv.Do(http.MethodPut, "/admin/models/smart", map[string]any{"binding": "hosted-compatible", "baseUrl": up.URL + "/v1", "model": "provider-model", "credentialRef": "secret://UP_KEY", "modalities": []string{"chat"}}); r.Status != http.StatusOK {
			t.Fatalf("replace: %d %s", r.Status, r.Body)
		}
		r = s.srv.Do(http.MethodGet, "/admin/models/smart/capabilities", nil)
		r.JSON(t, &c)
		if c.Cached || c.Revision != 2 || c.ToolCalling == nil || *c.ToolCalling || c.Reasoning == nil || *c.Reasoning || strings.Join(modalityStrings(c.Modalities), ",") != "chat" {
			t.Fatalf("after replace: %s", r.Body)
		}

		// A model the upstream does not have: chat unsupported, the rest unknown, hint on /v1.
		if r := s.srv.Do(http.MethodPut, "/admin/models/ghost", map[string]any{"binding": "hosted-compatible", "baseUrl": up.URL + "/v1", "model": "nope", "credentialRef": "secret://UP_KEY"}); r.Status != http.StatusCreated {
			t.Fatalf("register ghost: %d", r.Status)
		}
		r = s.srv.Do(http.MethodGet, "/admin/models/ghost/capabilities", nil)
		r.JSON(t, &c)
		if r.Status != http.StatusOK || c.ToolCalling != nil || c.Vision != nil || c.Reasoning != nil || c.MaxContext != nil {
			t.Fatalf("ghost: %d %s", r.Status, r.Body)
		}
	})
}

func TestCapabilitiesProbeFailures(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db)
		up := newUpstream(t)
		// Unresolvable credential: 502 credential_error naming the ref; nothing is sent upstream.
		s.srv.Do(http.MethodPut, "/admin/models/nokey", map[string]any{"binding": "hosted-compatible", "baseUrl": up.URL + "/v1", "model": "provider-model", "credentialRef": "secret://NOT_SET_ANYWHERE"})
		r := s.srv.Do(http.MethodGet, "/admin/models/nokey/capabilities", nil)
		if r.Status != http.StatusBadGateway || r.ErrorCode() != "credential_error" || !strings.Contains(string(r.Body), "secret://NOT_SET_ANYWHERE") || up.calls() != 0 {
			t.Fatalf("credential_error: %d %s (%d upstream calls)", r.Status, r.Body, up.calls())
		}
		// The environment provides it.
		s.env["NOT_SET_ANYWHERE"] = "env-key"
		if r := s.srv.Do(http.MethodGet, "/admin/models/nokey/capabilities", nil); r.Status != http.StatusOK {
			t.Fatalf("env credential: %d %s", r.Status, r.Body)
		}

		// Unreachable upstream: 502 upstream_unreachable, not cached.
		dead := httptest.NewServer(http.NotFoundHandler())
		deadURL := dead.URL
		dead.Close()
		s.srv.Do(http.MethodPut, "/admin/models/dead", map[string]any{"binding": "hosted-compatible", "baseUrl": deadURL + "/v1", "model": "m"})
		r = s.srv.Do(http.MethodGet, "/admin/models/dead/capabilities", nil)
		if r.Status != http.StatusBadGateway || r.ErrorCode() != "upstream_unreachable" {
			t.Fatalf("unreachable: %d %s", r.Status, r.Body)
		}
		if r := s.srv.Do(http.MethodGet, "/admin/models/missing/capabilities", nil); r.Status != http.StatusNotFound || r.ErrorCode() != "model_not_found" {
			t.Fatalf("missing: %d %s", r.Status, r.Body)
		}
	})
}

func modalityStrings(ms []models.Modality) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m)
	}
	return out
}

func FuzzSpecValidate(f *testing.F) {
	f.Add("gpt", `{"binding":"hosted-compatible","baseUrl":"https://h/v1","model":"m","maxTokens":5,"modalities":["chat"]}`)
	f.Add("a/b:c", `{"binding":"hosted-compatible","baseUrl":"http://u:p@h","model":"m","credentialRef":"secret://K"}`)
	f.Add("", `{"binding":"x"}`)
	f.Fuzz(func(t *testing.T, id, body string) {
		var spec models.Spec
		if json.Unmarshal([]byte(body), &spec) != nil {
			return
		}
		m, err := spec.Validate(id)
		if err != nil {
			return
		}
		if !models.ValidID(m.ID) || !(strings.HasPrefix(m.BaseURL, "http://") || strings.HasPrefix(m.BaseURL, "https://")) || m.Model == "" || m.MaxTokens < 0 {
			t.Fatalf("accepted %q %s → %+v", id, body, m)
		}
		if m.CredentialRef != "" {
			if _, err := credentials.ParseRef(m.CredentialRef); err != nil {
				t.Fatalf("accepted bad ref %q", m.CredentialRef)
			}
		}
	})
}

func TestConcurrentPutsOfOneID(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db)
		const n = 8
		statuses := make(chan int, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses <- s.srv.Do(http.MethodPut, "/admin/models/race", hosted(nil)).Status
			}()
		}
		wg.Wait()
		close(statuses)
		created := 0
		for st := range statuses {
			switch st {
			case http.StatusCreated:
				created++
			case http.StatusOK:
			default:
				t.Fatalf("status %d: %s", st, s.logs.String())
			}
		}
		m, err := s.svc.Resolve(context.Background(), "race")
		if created != 1 || err != nil || m.Revision != n {
			t.Fatalf("created %d times, revision %d (%v)", created, m.Revision, err)
		}
	})
}

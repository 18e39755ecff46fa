package dataplane_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
)

// closedURL is an address nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

func TestErrorMapping(t *testing.T) {
	fail := func(path string, status int, body string) dataplanetest.Script {
		return dataplanetest.Script{Fail: map[string]dataplanetest.Failure{path: {Status: status, Body: body}}}
	}
	chat := `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		name    string
		script  dataplanetest.Script
		tune    func(*dataplane.Options)
		extra   []dataplane.Target
		path    string
		body    string
		status  int
		code    string
		message string // substring of the message
		noCall  bool   // the upstream must not be called
	}{
		{name: "unregistered model", path: "/v1/chat/completions", body: `{"model":"gpt-4o","messages":[]}`, status: 404, code: "model_not_found", message: "gpt-4o", noCall: true},
		{name: "engine name", path: "/v1/embeddings", body: `{"model":"llama-server","input":"x"}`, status: 404, code: "model_not_found", noCall: true},
		{name: "provider-side name", path: "/v1/chat/completions", body: `{"model":"provider-chat-1","messages":[]}`, status: 404, code: "model_not_found", noCall: true},
		{name: "missing model", path: "/v1/chat/completions", body: `{"messages":[]}`, status: 400, code: "invalid_request", message: "model", noCall: true},
		{name: "model not a string", path: "/v1/embeddings", body: `{"model":42,"input":"x"}`, status: 400, code: "invalid_request", noCall: true},
		{name: "empty model", path: "/v1/audio/speech", body: `{"model":"","input":"x"}`, status: 400, code: "invalid_request", noCall: true},
		{name: "malformed JSON", path: "/v1/chat/completions", body: `{"model":"chat",`, status: 400, code: "invalid_request", noCall: true},
		{name: "not an object", path: "/v1/images/generations", body: `["chat"]`, status: 400, code: "invalid_request", noCall: true},
		{name: "empty body", path: "/v1/chat/completions", body: ``, status: 400, code: "invalid_request", noCall: true},
		{name: "duplicate model", path: "/v1/chat/completions", body: `{"model":"chat","model":"open"}`, status: 400, code: "invalid_request", message: "more than once", noCall: true},
		{name: "max_tokens not an integer", path: "/v1/chat/completions", body: `{"model":"chat","max_tokens":"lots"}`, status: 400, code: "invalid_request", message: "max_tokens", noCall: true},
		{name: "credential unresolvable", path: "/v1/chat/completions", body: `{"model":"nocred","messages":[]}`, status: 502, code: "credential_error", message: "secret://MISSING", noCall: true},
		{name: "unknown binding", extra: []dataplane.Target{{LogicalID: "local", Binding: "llama.cpp", Model: "m"}}, path: "/v1/chat/completions", body: `{"model":"local"}`, status: 503, code: "engine_unavailable", noCall: true},
		{name: "modality not registered", extra: []dataplane.Target{{LogicalID: "emb", Model: "e", Modalities: []string{"embeddings"}}}, path: "/v1/chat/completions", body: `{"model":"emb"}`, status: 404, code: "modality_not_supported", noCall: true},
		{name: "upstream 404", script: fail("/embeddings", 404, `{"error":{"message":"This model does not support embeddings","type":"invalid_request_error"}}`), path: "/v1/embeddings", body: `{"model":"chat","input":"x"}`, status: 404, code: "modality_not_supported", message: "does not support embeddings"},
		{name: "upstream 404 without /v1", extra: []dataplane.Target{{LogicalID: "nov1", Model: "m"}}, path: "/v1/chat/completions", body: `{"model":"nov1"}`, status: 404, code: "modality_not_supported", message: "no /v1 path"},
		{name: "upstream 400 passes through", script: fail("/chat/completions", 400, `{"error":{"message":"temperature is out of range","type":"invalid_request_error","param":"temperature","code":null}}`), path: "/v1/chat/completions", body: chat, status: 400, code: "upstream_error", message: "temperature is out of range"},
		{name: "upstream 429 passes through", script: fail("/chat/completions", 429, `{"error":"rate limited"}`), path: "/v1/chat/completions", body: chat, status: 429, code: "upstream_error", message: "rate limited"},
		{name: "upstream 500 becomes 502", script: fail("/chat/completions", 500, `upstream exploded`), path: "/v1/chat/completions", body: chat, status: 502, code: "upstream_error", message: "upstream exploded"},
		{name: "upstream 401 echoing the key", script: fail("/chat/completions", 401, `{"error":{"message":"Incorrect API key provided: `+secret+`","type":"invalid_request_error","code":"invalid_api_key"}}`), path: "/v1/chat/completions", body: chat, status: 502, code: "upstream_auth_failed", message: "[redacted]"},
		{name: "upstream unreachable", extra: []dataplane.Target{{LogicalID: "down", Model: "m"}}, path: "/v1/chat/completions", body: `{"model":"down"}`, status: 502, code: "upstream_unreachable", noCall: true},
		{name: "upstream timeout", script: dataplanetest.Script{Hang: make(chan struct{})}, tune: func(o *dataplane.Options) { o.Timeout = 100 * time.Millisecond }, path: "/v1/chat/completions", body: chat, status: 504, code: "upstream_timeout"},
		{name: "image answer without data", script: fail("/images/generations", 200, `{"created":1}`), path: "/v1/images/generations", body: `{"model":"chat","prompt":"p"}`, status: 502, code: "upstream_protocol"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var tune []func(*dataplane.Options)
			if tc.tune != nil {
				tune = append(tune, tc.tune)
			}
			b := setup(t, tc.script, tune...)
			if tc.script.Hang != nil {
				t.Cleanup(func() { close(tc.script.Hang) })
			}
			for _, x := range tc.extra {
				switch x.LogicalID {
				case "nov1", "emb":
					x.BaseURL = b.up.URL // no /v1
					if x.LogicalID == "emb" {
						x.BaseURL = b.up.BaseURL()
					}
				case "down":
					x.BaseURL = closedURL(t)
				}
				b.models.Put(x)
			}
			r := b.srv.Do("POST", tc.path, tc.body, "Authorization: Bearer client-key")
			var env struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    string `json:"code"`
				} `json:"error"`
			}
			r.JSON(t, &env)
			if r.Status != tc.status || env.Error.Code != tc.code {
				t.Fatalf("= %d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
			if env.Error.Message == "" || env.Error.Type == "" {
				t.Errorf("not the OpenAI error shape: %s", r.Body)
			}
			if tc.message != "" && !strings.Contains(env.Error.Message, tc.message) {
				t.Errorf("message %q lacks %q", env.Error.Message, tc.message)
			}
			if strings.Contains(string(r.Body), secret) {
				t.Errorf("the credential leaks into the answer: %s", r.Body)
			}
			if tc.noCall && len(b.up.Requests()) != 0 {
				t.Errorf("the upstream was called")
			}
		})
	}
}

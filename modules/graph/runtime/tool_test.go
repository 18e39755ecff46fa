package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svc-dev/svc/platform/apperr"
)

type connections map[string]Credential

func (c connections) Resolve(ctx context.Context, name string) (Credential, error) {
	if name == "disabled" {
		return Credential{}, apperr.Conflict("connection_disabled", "connection is disabled")
	}
	cred, found := c[name]
	if !found {
		return Credential{}, apperr.NotFound("connection_not_found", "no such connection")
	}
	return cred, nil
}

// toolGraph is one http tool whose out and err go to two output nodes (err optional).
func toolGraph(t *testing.T, tool string, wireErr bool, timeoutMs int) string {
	t.Helper()
	edges := `{"source":"call","target":"ok"}`
	nodes := fmt.Sprintf(`{"id":"call","kind":"tool","timeoutMs":%d,"tool":%s},{"id":"ok","kind":"output"}`, timeoutMs, tool)
	if wireErr {
		nodes += `,{"id":"bad","kind":"output","value":{"failed":"$in.in"}}`
		edges += `,{"source":"call","sourcePort":"err","target":"bad"}`
	}
	return `{"nodes":[` + nodes + `],"edges":[` + edges + `]}`
}

func TestHTTPToolSuccess(t *testing.T) {
	var got struct {
		method, path, auth, key, ctype, body, custom string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		got.method, got.path, got.auth, got.key, got.ctype, got.body, got.custom =
			r.Method, r.URL.Path, r.Header.Get("Authorization"), r.URL.Query().Get("key"), r.Header.Get("Content-Type"), string(raw), r.Header.Get("X-Ticket")
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-Trace", "t1")
		w.Header()["Date"] = nil // keep the answer deterministic
		io.WriteString(w, `{"id":42}`)
	}))
	defer srv.Close()
	tool := fmt.Sprintf(`{"type":"http","method":"post","url":"%s/tickets/$in.in.id","headers":{"X-Ticket":"t-$in.in.id"},"body":{"title":"$in.in.title","n":3},"connection":"svc"}`, srv.URL)
	g := mustGraph(t, toolGraph(t, tool, true, 0))
	e := New(Deps{Connections: connections{"svc": {Header: "Authorization", Value: "Bearer s3cret", Query: map[string]string{"key": "k1"}}}})
	rec := &recorder{}
	res := runG(t, e, g, mustJSON(t, `{"id":"7","title":"crash"}`), rec, nil)
	wantOutput(t, res, `{"body":{"id":42},"headers":{"content-length":"9","content-type":"application/json; charset=utf-8","x-trace":"t1"},"status":200}`)
	if got.method != "POST" || got.path != "/tickets/7" || got.auth != "Bearer s3cret" || got.key != "k1" || got.ctype != "application/json" || got.custom != "t-7" {
		t.Fatalf("request %+v", got)
	}
	if got.body != `{"n":3,"title":"crash"}` {
		t.Fatalf("body %s", got.body)
	}
	fin := rec.of(EventNodeFinished, "call")
	if len(fin) != 1 || fin[0].Attr.ToolType != "http" || fin[0].Attr.ToolHost != "127.0.0.1" || fin[0].Attr.Connection != "svc" {
		t.Fatalf("attribution %+v", fin)
	}
	if st := rec.statusOf(); st["bad"] != EventNodeSkipped {
		t.Fatalf("err branch not skipped: %v", st)
	}
}

func TestHTTPToolBasicAuthAndTextBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		raw, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s:%s:%s:%s", u, p, raw, r.Header.Get("Content-Type"))
	}))
	defer srv.Close()
	tool := fmt.Sprintf(`{"type":"http","url":"%s","body":"hello $in.in","connection":"b"}`, srv.URL)
	e := New(Deps{Connections: connections{"b": {Basic: &BasicAuth{Username: "u", Password: "p"}}}})
	res := runG(t, e, mustGraph(t, toolGraph(t, tool, false, 0)), "ada", nil, nil)
	if res.Status != StatusCompleted {
		t.Fatalf("%+v", res)
	}
	if body := res.Output.(map[string]any)["body"]; body != "u:p:hello ada:text/plain; charset=utf-8" {
		t.Fatalf("body %v", body)
	}
}

func TestHTTPToolErrors(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"detail":"boom"}`)
		case "/slow":
			select {
			case <-block:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	e := New(Deps{Connections: connections{}})
	cases := []struct {
		name, tool, code string
		status           float64
	}{
		{"non-2xx", fmt.Sprintf(`{"type":"http","url":"%s/500"}`, srv.URL), "http_status", 500},
		{"network", fmt.Sprintf(`{"type":"http","url":"%s/x?key=SECRETQ"}`, closedURL), "network_error", 0},
		{"timeout", fmt.Sprintf(`{"type":"http","url":"%s/slow"}`, srv.URL), "timeout", 0},
		{"missing connection", fmt.Sprintf(`{"type":"http","url":"%s/","connection":"nope"}`, srv.URL), "connection_not_found", 0},
		{"disabled connection", fmt.Sprintf(`{"type":"http","url":"%s/","connection":"disabled"}`, srv.URL), "connection_disabled", 0},
		{"bad url", `{"type":"http","url":"ftp://x"}`, "invalid_request", 0},
		{"unknown type", `{"type":"carrier-pigeon"}`, "unknown_tool_type", 0},
		{"mcp without client", `{"type":"mcp","server":"s","name":"n"}`, "mcp_unavailable", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name+" with err edge", func(t *testing.T) {
			rec := &recorder{}
			res := runG(t, e, mustGraph(t, toolGraph(t, tc.tool, true, 200)), nil, rec, nil)
			if res.Status != StatusCompleted || res.Note != "" {
				t.Fatalf("%+v", res)
			}
			failed := res.Output.(map[string]any)["failed"].(map[string]any)
			if failed["code"] != tc.code {
				t.Fatalf("err value %v, want code %s", failed, tc.code)
			}
			if tc.status != 0 && failed["status"] != int(tc.status) {
				t.Fatalf("status %v", failed["status"])
			}
			if strings.Contains(asJSON(failed), "SECRETQ") {
				t.Fatalf("secret query leaked: %v", failed)
			}
			fin := rec.of(EventNodeFinished, "call")
			if len(fin) != 1 || fin[0].Status != NodeFailed || fin[0].Error == nil || fin[0].Error.Code != tc.code {
				t.Fatalf("event %+v", fin)
			}
			if st := rec.statusOf(); st["ok"] != EventNodeSkipped {
				t.Fatalf("out branch not skipped: %v", st)
			}
		})
		t.Run(tc.name+" without err edge", func(t *testing.T) {
			res := runG(t, e, mustGraph(t, toolGraph(t, tc.tool, false, 200)), nil, nil, nil)
			if res.Status != StatusCompleted || res.HasOutput {
				t.Fatalf("%+v", res)
			}
			if !strings.Contains(res.Note, `tool node "call" failed: `+tc.code) || !strings.Contains(res.Note, "without reaching an output") {
				t.Fatalf("note %q", res.Note)
			}
		})
	}
}

func TestHTTPToolBodyOnErrPort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(429)
		io.WriteString(w, `{"retryAfter":3}`)
	}))
	defer srv.Close()
	res := runG(t, New(Deps{}), mustGraph(t, toolGraph(t, fmt.Sprintf(`{"type":"http","url":"%s"}`, srv.URL), true, 0)), nil, nil, nil)
	wantOutput(t, res, `{"failed":{"body":{"retryAfter":3},"code":"http_status","message":"HTTP 429","status":429}}`)
}

func TestHTTPToolTemplateErrorFailsRun(t *testing.T) {
	g := mustGraph(t, toolGraph(t, `{"type":"http","url":"http://example.invalid/$in.in.missing"}`, true, 0))
	wantCode(t, runG(t, New(Deps{}), g, mustJSON(t, `{}`), nil, nil), "template_error", "call")
}

type mcpFunc func(ctx context.Context, server, name string, args any, connection string) (any, error)

func (f mcpFunc) CallTool(ctx context.Context, server, name string, args any, connection string) (any, error) {
	return f(ctx, server, name, args, connection)
}

func TestMCPTool(t *testing.T) {
	var calls atomic.Int32
	mcp := mcpFunc(func(ctx context.Context, server, name string, args any, connection string) (any, error) {
		calls.Add(1)
		if name == "fail" {
			return nil, errors.New("tool exploded")
		}
		raw, _ := json.Marshal(args)
		return map[string]any{"server": server, "name": name, "args": string(raw), "conn": connection}, nil
	})
	e := New(Deps{MCP: mcp})
	res := runG(t, e, mustGraph(t, toolGraph(t, `{"type":"mcp","server":"files","name":"read","arguments":{"path":"$in.in.p"},"connection":"c"}`, true, 0)), mustJSON(t, `{"p":"/a"}`), nil, nil)
	wantOutput(t, res, `{"args":"{\"path\":\"/a\"}","conn":"c","name":"read","server":"files"}`)
	res = runG(t, e, mustGraph(t, toolGraph(t, `{"type":"mcp","server":"files","name":"fail"}`, true, 0)), nil, nil, nil)
	wantOutput(t, res, `{"failed":{"code":"mcp_error","message":"tool exploded"}}`)
	if calls.Load() != 2 {
		t.Fatalf("calls %d", calls.Load())
	}
}

func TestHTTPToolKeepsSecretsOnHost(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" || r.URL.Query().Get("token") != "" {
			leaked.Store(true)
		}
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/local" {
			http.Redirect(w, r, "/final", http.StatusFound)
			return
		}
		if r.URL.Path == "/final" {
			fmt.Fprint(w, r.Header.Get("X-Api-Key"))
			return
		}
		http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
	}))
	defer srv.Close()
	e := New(Deps{Connections: connections{"k": {Header: "X-Api-Key", Value: "sekrit", Query: map[string]string{"token": "t"}}}})
	res := runG(t, e, mustGraph(t, toolGraph(t, fmt.Sprintf(`{"type":"http","url":"%s/away","connection":"k"}`, srv.URL), true, 0)), nil, nil, nil)
	failed, _ := res.Output.(map[string]any)["failed"].(map[string]any)
	if res.Status != StatusCompleted || failed["code"] != "http_status" || failed["status"] != 302 {
		t.Fatalf("%+v", res)
	}
	if leaked.Load() {
		t.Fatal("credential followed a cross-host redirect")
	}
	// Same-host redirects are followed with the credential.
	res = runG(t, e, mustGraph(t, toolGraph(t, fmt.Sprintf(`{"type":"http","url":"%s/local","connection":"k"}`, srv.URL), true, 0)), nil, nil, nil)
	if res.Status != StatusCompleted || res.Output.(map[string]any)["body"] != "sekrit" {
		t.Fatalf("%+v", res)
	}
}

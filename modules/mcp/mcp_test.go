package mcp_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/mcp"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

// The test binary doubles as a stdio MCP server (a small helper process built from the test
// code), so the stdio transport is exercised with a real child process.
func TestMain(m *testing.M) {
	if os.Getenv("SVC_MCP_STDIO_SERVER") == "1" {
		if err := newToolServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}
type addOut struct {
	Sum int `json:"sum"`
}
type envIn struct {
	Name string `json:"name"`
}

func newToolServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "test-tools", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "adds two numbers"}, func(ctx context.Context, req *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
		return nil, addOut{Sum: in.A + in.B}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "env", Description: "reads an environment variable"}, func(ctx context.Context, req *sdk.CallToolRequest, in envIn) (*sdk.CallToolResult, map[string]string, error) {
		return nil, map[string]string{"value": os.Getenv(in.Name)}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "always fails"}, func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "it broke"}}}, nil, nil
	})
	return s
}

type fakeConns map[string]mcp.Auth

func (f fakeConns) ResolveMCP(ctx context.Context, name string) (mcp.Auth, error) {
	a, ok := f[name]
	if !ok {
		return mcp.Auth{}, apperr.NotFound("connection_not_found", "connection "+name+" does not exist")
	}
	return a, nil
}

type bundle struct {
	srv  *testkit.Server
	svc  *mcp.Service
	logs *bytes.Buffer
}

func setup(t *testing.T, db *database.DB) bundle {
	logs := &bytes.Buffer{}
	svc := mcp.NewService(db, secrets.Ephemeral(), fakeConns{"gh": {Header: "Authorization", Value: "Bearer conn-secret-1", Env: map[string]string{"GH_TOKEN": "conn-secret-1"}}}, zerolog.New(logs))
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	return bundle{srv: testkit.New(t, testkit.Options{LogTo: logs}, mcp.New(svc)), svc: svc, logs: logs}
}

func TestStdioServerLifecycle(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db)
		r := b.srv.Do("PUT", "/admin/mcp/servers/local", map[string]any{
			"transport": "stdio", "command": exe, "args": []string{"-test.run=^$"},
			"env": map[string]string{"SVC_MCP_STDIO_SERVER": "1", "API_TOKEN": "env-secret-42"},
		})
		if r.Status != 201 {
			t.Fatalf("put: %d %s", r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), "env-secret-42") {
			t.Fatal("env value echoed")
		}
		r = b.srv.Do("GET", "/admin/mcp/servers/local/tools", nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), `"add"`) {
			t.Fatalf("tools: %d %s", r.Status, r.Body)
		}
		if got := b.srv.Do("GET", "/admin/mcp/servers/local", nil).Map(t)["state"]; got != "connected" {
			t.Fatalf("state after lazy connect: %v", got)
		}
		out, err := b.svc.CallTool(context.Background(), "local", "add", map[string]any{"a": 2, "b": 40}, "")
		if err != nil {
			t.Fatal(err)
		}
		if sc := out.(map[string]any)["structuredContent"].(map[string]any); sc["sum"] != float64(42) {
			t.Fatalf("add: %v", out)
		}
		// The registered env reaches the child process.
		out, err = b.svc.CallTool(context.Background(), "local", "env", map[string]any{"name": "API_TOKEN"}, "")
		if err != nil || out.(map[string]any)["structuredContent"].(map[string]any)["value"] != "env-secret-42" {
			t.Fatalf("env: %v %v", out, err)
		}
		_, err = b.svc.CallTool(context.Background(), "local", "fail", map[string]any{}, "")
		if ae := apperr.From(err); ae == nil || ae.Code != "mcp_tool_error" || !strings.Contains(ae.Message, "it broke") {
			t.Fatalf("fail: %v", err)
		}
		if r := b.srv.Do("POST", "/admin/mcp/servers/local:close", nil); r.Status != 200 || r.Map(t)["state"] != "idle" {
			t.Fatalf("close: %d %s", r.Status, r.Body)
		}
		if r := b.srv.Do("POST", "/admin/mcp/servers/local:warm", nil); r.Status != 200 || r.Map(t)["state"] != "connected" {
			t.Fatalf("warm: %d %s", r.Status, r.Body)
		}
		list := b.srv.Do("GET", "/admin/mcp/servers", nil)
		if list.Status != 200 || strings.Contains(string(list.Body), "env-secret-42") || !strings.Contains(string(list.Body), "API_TOKEN") {
			t.Fatalf("list: %s", list.Body)
		}
		if r := b.srv.Do("DELETE", "/admin/mcp/servers/local", nil); r.Status != 204 {
			t.Fatalf("delete: %d", r.Status)
		}
		if r := b.srv.Do("GET", "/admin/mcp/servers/local", nil); r.Status != 404 || r.ErrorCode() != "mcp_server_not_found" {
			t.Fatalf("after delete: %d %s", r.Status, r.Body)
		}
		if strings.Contains(b.logs.String(), "env-secret-42") {
			t.Fatal("secret in logs")
		}
	})
}

func TestHTTPServerWithConnectionHeader(t *testing.T) {
	var sawAuth atomic.Value
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newToolServer() }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth.Store(r.Header.Get("Authorization") + "|" + r.Header.Get("X-Team"))
		h.ServeHTTP(w, r)
	}))
	defer up.Close()
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db)
		r := b.srv.Do("PUT", "/admin/mcp/servers/remote", map[string]any{
			"transport": "http", "url": up.URL, "headers": map[string]string{"X-Team": "blue-secret-7"}, "connection": "gh",
		})
		if r.Status != 201 || strings.Contains(string(r.Body), "blue-secret-7") {
			t.Fatalf("put: %d %s", r.Status, r.Body)
		}
		out, err := b.svc.CallTool(context.Background(), "remote", "add", map[string]any{"a": 1, "b": 1}, "gh")
		if err != nil {
			t.Fatal(err)
		}
		if out.(map[string]any)["structuredContent"].(map[string]any)["sum"] != float64(2) {
			t.Fatalf("add: %v", out)
		}
		if got := sawAuth.Load(); got != "Bearer conn-secret-1|blue-secret-7" {
			t.Fatalf("headers at the server: %v", got)
		}
		// Replacing the registration is 200 and drops the session.
		r = b.srv.Do("PUT", "/admin/mcp/servers/remote", map[string]any{"transport": "http", "url": up.URL})
		if r.Status != 200 || r.Map(t)["state"] != "idle" {
			t.Fatalf("replace: %d %s", r.Status, r.Body)
		}
		// A node naming a connection that does not exist gets an error, not a call.
		if _, err := b.svc.CallTool(context.Background(), "remote", "add", map[string]any{}, "nope"); apperr.From(err) == nil || apperr.From(err).Code != "connection_not_found" {
			t.Fatalf("missing connection: %v", err)
		}
	})
}

func TestUnreachableAndBadInput(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db)
		r := b.srv.Do("PUT", "/admin/mcp/servers/down", map[string]any{"transport": "http", "url": "http://127.0.0.1:1/mcp", "timeoutMs": 2000})
		if r.Status != 201 {
			t.Fatalf("put: %d %s", r.Status, r.Body)
		}
		r = b.srv.Do("GET", "/admin/mcp/servers/down/tools", nil)
		if r.Status != 503 || r.ErrorCode() != "mcp_unavailable" {
			t.Fatalf("unreachable: %d %s", r.Status, r.Body)
		}
		r = b.srv.Do("PUT", "/admin/mcp/servers/gone", map[string]any{"transport": "stdio", "command": "/nonexistent/mcp-server"})
		if r.Status != 201 {
			t.Fatal(r.Status)
		}
		if r := b.srv.Do("POST", "/admin/mcp/servers/gone:warm", nil); r.Status != 503 || r.ErrorCode() != "mcp_unavailable" {
			t.Fatalf("missing binary: %d %s", r.Status, r.Body)
		}
		bad := []struct {
			name string
			body any
		}{
			{"no transport", map[string]any{}},
			{"bad transport", map[string]any{"transport": "smoke"}},
			{"stdio without command", map[string]any{"transport": "stdio"}},
			{"http without url", map[string]any{"transport": "http"}},
			{"http bad url", map[string]any{"transport": "http", "url": "ftp://x"}},
			{"stdio with url", map[string]any{"transport": "stdio", "command": "x", "url": "http://a"}},
			{"http with env", map[string]any{"transport": "http", "url": "http://a", "env": map[string]string{"A": "b"}}},
			{"bad env key", map[string]any{"transport": "stdio", "command": "x", "env": map[string]string{"1A": "b"}}},
			{"header injection", map[string]any{"transport": "http", "url": "http://a", "headers": map[string]string{"X": "a\r\nB: c"}}},
			{"negative timeout", map[string]any{"transport": "http", "url": "http://a", "timeoutMs": -1}},
			{"unknown field", map[string]any{"transport": "http", "url": "http://a", "colour": "red"}},
			{"args not list", map[string]any{"transport": "stdio", "command": "x", "args": "a b"}},
			{"not json", "{"},
		}
		for _, tc := range bad {
			r := b.srv.Do("PUT", "/admin/mcp/servers/x1", tc.body)
			if r.Status != 400 || r.ErrorCode() != "invalid_request" {
				t.Fatalf("%s: %d %s", tc.name, r.Status, r.Body)
			}
		}
		if r := b.srv.Do("PUT", "/admin/mcp/servers/..bad", map[string]any{"transport": "http", "url": "http://a"}); r.Status != 400 {
			t.Fatalf("bad name: %d", r.Status)
		}
		if r := b.srv.Do("GET", "/admin/mcp/servers/x1", nil); r.Status != 404 {
			t.Fatalf("bad input stored something: %d", r.Status)
		}
		if r := b.srv.Do("POST", "/admin/mcp/servers/down:explode", nil); r.Status != 404 {
			t.Fatalf("unknown action: %d", r.Status)
		}
		if r := b.srv.Do("POST", "/admin/mcp/servers/down", nil); r.Status != 405 {
			t.Fatalf("no action: %d", r.Status)
		}
	})
}

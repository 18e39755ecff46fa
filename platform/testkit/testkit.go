// Package testkit runs modules behind the real HTTP stack (the shared echo setup and error
// handler) on an httptest server, and offers a small JSON client for scenario tests.
package testkit

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/httpx"
)

// Server is a running test server.
type Server struct {
	*httptest.Server
	Echo *echo.Echo
	t    testing.TB
}

// Options tune the server; zero values are fine.
type Options struct {
	httpx.Options
	// LogTo receives the server's log lines (for tests that search logs for secrets).
	LogTo io.Writer
}

// New starts a server mounting modules with the shared middleware and error handler.
func New(t testing.TB, opts Options, modules ...httpx.Module) *Server {
	t.Helper()
	if opts.LogTo != nil {
		// Concurrent requests log at once: serialise their writes.
		opts.Logger = zerolog.New(zerolog.SyncWriter(opts.LogTo))
	} else {
		opts.Logger = zerolog.Nop()
	}
	e := httpx.NewEcho(opts.Options)
	g := e.Group("")
	for _, m := range modules {
		m.Register(g)
	}
	s := &Server{Server: httptest.NewServer(e), Echo: e, t: t}
	t.Cleanup(s.Close)
	return s
}

// Response is a finished request.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v (failing the test on error) and returns it.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Map decodes the body as a JSON object.
func (r *Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// ErrorCode returns error.code of an error envelope ("" if absent).
func (r *Response) ErrorCode() string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &env)
	return env.Error.Code
}

// Do sends a request. body may be nil, a string or []byte (sent as is), or any other value
// (JSON-encoded). headers are "Key: Value" strings.
func (s *Server) Do(method, path string, body any, headers ...string) *Response {
	s.t.Helper()
	return Do(s.t, s.URL, method, path, body, headers...)
}

// Do sends a request to base+path.
func Do(t testing.TB, base, method, path string, body any, headers ...string) *Response {
	t.Helper()
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd, ct = strings.NewReader(b), "application/json"
	case []byte:
		rd, ct = bytes.NewReader(b), "application/json"
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("encode body: %v", err)
		}
		rd, ct = bytes.NewReader(raw), "application/json"
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

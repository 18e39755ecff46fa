package httpx_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/httpx"
	"github.com/svc-dev/svc/platform/testkit"
)

type probe struct{}

func (probe) OpenAPI() []byte { return nil }
func (probe) Register(g *echo.Group) {
	g.POST("/echo", func(c echo.Context) error {
		var body struct {
			Name  string `json:"name"`
			Count int    `json:"count"`
		}
		if err := httpx.BindJSON(c, &body); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, body)
	})
	g.GET("/panic", func(c echo.Context) error { panic("secret internal detail") })
	g.GET("/conflict", func(c echo.Context) error {
		return apperr.Conflict("agent_exists", "agent a exists").WithDetails(map[string]string{"id": "a"})
	})
	g.GET("/v1/thing", func(c echo.Context) error { return apperr.NotFound("model_not_found", "no model x") })
	g.GET("/list", func(c echo.Context) error {
		p, err := httpx.ParsePage(c)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]int{"limit": p.Limit})
	})
}

func TestErrorEnvelope(t *testing.T) {
	var logs bytes.Buffer
	s := testkit.New(t, testkit.Options{LogTo: &logs, Options: httpx.Options{BodyLimit: 64, OpenAIPrefix: "/v1/", CORSOrigins: []string{"https://ui.example"}}}, probe{})
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code               string
		msgHas             string
	}{
		{"unknown route", "GET", "/nope", nil, 404, "not_found", ""},
		{"wrong method", "DELETE", "/echo", nil, 405, "method_not_allowed", ""},
		{"malformed json", "POST", "/echo", `{"name":`, 400, "invalid_request", "malformed JSON"},
		{"wrong type", "POST", "/echo", `{"name": 3}`, 400, "invalid_request", `must be a string`},
		{"unknown field", "POST", "/echo", `{"nam": "x"}`, 400, "invalid_request", "unknown field"},
		{"trailing data", "POST", "/echo", `{"name": "x"} {}`, 400, "invalid_request", "after the JSON value"},
		{"empty body", "POST", "/echo", ``, 400, "invalid_request", "required"},
		{"not an object", "POST", "/echo", `[1]`, 400, "invalid_request", "object"},
		{"too large", "POST", "/echo", `{"name":"` + strings.Repeat("a", 200) + `"}`, 413, "payload_too_large", ""},
		{"panic", "GET", "/panic", nil, 500, "internal", ""},
		{"domain error", "GET", "/conflict", nil, 409, "agent_exists", "agent a exists"},
		{"limit too big", "GET", "/list?limit=201", nil, 400, "invalid_request", "limit"},
		{"limit not number", "GET", "/list?limit=x", nil, 400, "invalid_request", "limit"},
		{"limit zero", "GET", "/list?limit=0", nil, 400, "invalid_request", "limit"},
		{"NUL escape in body", "POST", "/echo", `{"name":"a\u0000b"}`, 400, "invalid_request", "NUL"},
		{"invalid UTF-8 in body", "POST", "/echo", "{\"name\":\"a\xff\xfeb\"}", 400, "invalid_request", "UTF-8"},
		{"invalid UTF-8 in a key", "POST", "/echo", "{\"\xc0\":1}", 400, "invalid_request", "UTF-8"},
		{"NUL in query", "GET", "/list?before=a%00b", nil, 400, "invalid_request", "control"},
		{"invalid UTF-8 in query", "GET", "/list?before=%ff%fe", nil, 400, "invalid_request", "UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Do(tc.method, tc.path, tc.body)
			if r.Status != tc.status || r.ErrorCode() != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
			if tc.msgHas != "" && !strings.Contains(string(r.Body), tc.msgHas) {
				t.Fatalf("message lacks %q: %s", tc.msgHas, r.Body)
			}
			if strings.Contains(string(r.Body), "secret internal detail") {
				t.Fatal("panic detail leaked")
			}
		})
	}
	if !strings.Contains(logs.String(), "secret internal detail") {
		t.Fatal("panic not logged")
	}
	// A valid body passes.
	if r := s.Do("POST", "/echo", `{"name":"a","count":2}`); r.Status != 200 {
		t.Fatalf("valid body: %d %s", r.Status, r.Body)
	}
	if r := s.Do("POST", "/echo", `{"name":"a\\u0000b"}`); r.Status != 200 {
		t.Fatalf("escaped backslash is not NUL: %d %s", r.Status, r.Body)
	}
	if r := s.Do("GET", "/list", nil); r.Map(t)["limit"].(float64) != 50 {
		t.Fatal("default limit")
	}
	// OpenAI-shaped errors under /v1/.
	r := s.Do("GET", "/v1/thing", nil)
	m := r.Map(t)["error"].(map[string]any)
	if r.Status != 404 || m["code"] != "model_not_found" || m["type"] != "not_found_error" || m["message"] == "" {
		t.Fatalf("openai shape: %s", r.Body)
	}
}

func TestRequestIDAndCORS(t *testing.T) {
	s := testkit.New(t, testkit.Options{Options: httpx.Options{CORSOrigins: []string{"https://ui.example"}}}, probe{})
	r := s.Do("GET", "/list", nil, "X-Request-Id: abc-123")
	if r.Header.Get("X-Request-Id") != "abc-123" {
		t.Fatalf("request id not echoed: %v", r.Header)
	}
	r = s.Do("GET", "/list", nil)
	if !strings.HasPrefix(r.Header.Get("X-Request-Id"), "req_") {
		t.Fatalf("request id not minted: %v", r.Header)
	}
	r = s.Do("GET", "/list", nil, "Origin: https://ui.example")
	if r.Header.Get("Access-Control-Allow-Origin") != "https://ui.example" {
		t.Fatalf("allowed origin refused: %v", r.Header)
	}
	r = s.Do("GET", "/list", nil, "Origin: https://evil.example")
	if r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("foreign origin allowed: %v", r.Header)
	}
	none := testkit.New(t, testkit.Options{}, probe{})
	r = none.Do("GET", "/list", nil, "Origin: https://ui.example")
	if r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("CORS must be off when no origins are configured")
	}
}

func TestAccessLog(t *testing.T) {
	var logs bytes.Buffer
	s := testkit.New(t, testkit.Options{LogTo: &logs}, probe{})
	s.Do("GET", "/list?limit=3", nil, "X-Request-Id: rid-9")
	line := logs.String()
	for _, want := range []string{`"request_id":"rid-9"`, `"method":"GET"`, `"path":"/list"`, `"status":200`, `"latency"`} {
		if !strings.Contains(line, want) {
			t.Fatalf("access log lacks %s: %s", want, line)
		}
	}
}

package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

func TestMiddlewareAndHandler(t *testing.T) {
	m := New()
	e := echo.New()
	e.Pre(m.Middleware("control"))
	e.GET("/things/:id", func(c echo.Context) error { return c.String(http.StatusTeapot, "x") })
	m.Module().Register(e.Group(""))
	if err := m.ResidentEngines(func() float64 { return 3 }); err != nil {
		t.Fatal(err)
	}
	// Registering the gauge again (a rebuilt plane) replaces it instead of failing.
	if err := m.ResidentEngines(func() float64 { return 2 }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	for _, p := range []string{"/things/1", "/things/2", "/nowhere/secret-token"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`svc_http_requests_total{method="GET",plane="control",route="/things/:id",status="418"} 2`,
		`svc_http_request_duration_seconds_count{method="GET",plane="control",route="/things/:id"} 2`,
		`svc_engines_resident 2`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("missing %s in\n%s", want, text)
		}
	}
	// Raw paths never become label values.
	if strings.Contains(text, "secret-token") || strings.Contains(text, `route="/nowhere`) {
		t.Fatalf("raw path leaked into labels:\n%s", text)
	}
}

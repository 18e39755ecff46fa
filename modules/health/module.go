// Package health serves liveness (/healthz) and readiness (/readyz) for a plane.
package health

import (
	"context"
	_ "embed"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/apperr"
)

// Check is one dependency readiness depends on.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Reporter adds plane-specific detail to a ready answer (e.g. engine readiness).
type Reporter func(ctx context.Context) map[string]any

// Module serves /healthz and /readyz.
type Module struct {
	checks   []Check
	reporter Reporter
}

// New builds the module; readiness runs every check on every call, so it recovers
// without a restart.
func New(reporter Reporter, checks ...Check) *Module {
	return &Module{checks: checks, reporter: reporter}
}

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	g.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	g.GET("/readyz", m.ready)
}

// ErrNotReady is the 503 naming the dependencies that are down.
var ErrNotReady = apperr.Unavailable("not_ready", "not ready")

func (m *Module) ready(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	type result struct {
		Status string `json:"status"`
		Error  string `json:"error,omitempty"`
	}
	results := make(map[string]result, len(m.checks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, ch := range m.checks {
		wg.Add(1)
		go func(ch Check) {
			defer wg.Done()
			r := result{Status: "ok"}
			if err := ch.Fn(ctx); err != nil {
				r = result{Status: "down", Error: err.Error()}
			}
			mu.Lock()
			results[ch.Name] = r
			mu.Unlock()
		}(ch)
	}
	wg.Wait()
	var down []string
	for name, r := range results {
		if r.Status != "ok" {
			down = append(down, name)
		}
	}
	sort.Strings(down)
	body := map[string]any{"status": "ok", "checks": results}
	if m.reporter != nil {
		for k, v := range m.reporter(ctx) {
			body[k] = v
		}
	}
	if len(down) > 0 {
		msg := "not ready: " + down[0] + " is down"
		if len(down) > 1 {
			msg = "not ready: " + joinNames(down) + " are down"
		}
		return ErrNotReady.Msg("%s", msg).WithDetails(map[string]any{"down": down, "checks": results})
	}
	return c.JSON(http.StatusOK, body)
}

func joinNames(s []string) string {
	out := ""
	for i, n := range s {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

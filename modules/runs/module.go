package runs

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/httpx"
)

// ModuleOptions tune the HTTP side.
type ModuleOptions struct {
	// InvokeToken is SERVICE_INVOKE_TOKEN; empty closes POST /agents/{id}/invoke.
	InvokeToken string
	// Keepalive is the interval of ": keepalive" comments on run streams; 0 = 15 seconds.
	Keepalive time.Duration
}

// Module serves the run API and sweeps interrupted runs at start.
type Module struct {
	svc       *Service
	token     [sha256.Size]byte
	hasToken  bool
	keepalive time.Duration
}

// New builds the module on a service.
func New(svc *Service, opts ModuleOptions) *Module {
	if svc == nil {
		panic("runs: nil service") // a composition-root bug, caught at start
	}
	m := &Module{svc: svc, keepalive: opts.Keepalive}
	if m.keepalive <= 0 {
		m.keepalive = httpx.DefaultSSEKeepalive
	}
	if opts.InvokeToken != "" {
		m.token, m.hasToken = sha256.Sum256([]byte(opts.InvokeToken)), true
	}
	return m
}

// Service returns the module's service (triggers start runs through it).
func (m *Module) Service() *Service { return m.svc }

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	g.GET("/runs", m.list)
	g.GET("/runs/:id", m.get)
	g.POST("/runs", m.startPrompt)
	g.POST("/graphs/runs", m.startGraph)
	g.POST("/agents/:id/runs", m.startAgent)
	g.POST("/agents/:id/invoke", m.invoke)
}

// Start sweeps the runs that stopped processes left in flight, then starts renewing this
// process's leases and sweeping periodically (httpx.Starter).
func (m *Module) Start(ctx context.Context) error {
	n, err := m.svc.Sweep(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		m.svc.log.Warn().Int64("runs", n).Msg("startup sweep: marked runs left in flight by a stopped process as failed (interrupted)")
	}
	m.svc.startLeases()
	return nil
}

// Stop ends background runs (httpx.Starter).
func (m *Module) Stop(ctx context.Context) error { return m.svc.Stop(ctx) }

func (m *Module) list(c echo.Context) error {
	p, err := httpx.ParsePage(c)
	if err != nil {
		return err
	}
	page, err := m.svc.store.List(c.Request().Context(), ListQuery{
		Limit: p.Limit, Before: p.Before, AgentID: c.QueryParam("agent_id"), Status: c.QueryParam("status"),
		SessionID: c.QueryParam("session_id"), TriggerID: c.QueryParam("trigger_id"),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (m *Module) get(c echo.Context) error {
	r, err := m.svc.store.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func (m *Module) startPrompt(c echo.Context) error {
	var req PromptRequest
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	p, err := m.svc.preparePrompt(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return m.run(c, p, req.Stream, true)
}

func (m *Module) startGraph(c echo.Context) error {
	var req GraphRequest
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	p, err := m.svc.prepareGraph(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return m.run(c, p, req.Stream, true)
}

func (m *Module) startAgent(c echo.Context) error {
	var req AgentRequest
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	p, err := m.svc.prepareAgent(c.Request().Context(), c.Param("id"), req)
	if err != nil {
		return err
	}
	return m.run(c, p, req.Stream, true)
}

// invoke is the agent run for machines: bearer-token protected, immediate by default. The
// token is checked before the body is read or the agent looked up, so an unauthenticated
// caller learns nothing about which agents exist.
func (m *Module) invoke(c echo.Context) error {
	if err := m.authorize(c.Request()); err != nil {
		return err
	}
	var req AgentRequest
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	p, err := m.svc.prepareAgent(c.Request().Context(), c.Param("id"), req)
	if err != nil {
		return err
	}
	return m.run(c, p, req.Stream, false)
}

// authorize compares the bearer token with SERVICE_INVOKE_TOKEN in constant time (hashes of
// equal length, so not even the token's length leaks). No token configured: closed.
func (m *Module) authorize(r *http.Request) error {
	if !m.hasToken {
		return ErrUnauthorized.Msg("invoke is closed: SERVICE_INVOKE_TOKEN is not set on the control plane")
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return ErrUnauthorized.Msg("the Authorization header must be: Bearer <SERVICE_INVOKE_TOKEN>")
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(got[:], m.token[:]) != 1 {
		return ErrUnauthorized.Msg("the bearer token does not match")
	}
	return nil
}

// immediateResult is the stream: false answer (camelCase, IR.md).
type immediateResult struct {
	RunID  string    `json:"runId"`
	Status string    `json:"status"`
	Output any       `json:"output"`
	Note   string    `json:"note,omitempty"`
	Error  *RunError `json:"error,omitempty"`
}

// run records and executes a prepared run, streamed or immediate.
func (m *Module) run(c echo.Context, p *prepared, stream *bool, streamDefault bool) error {
	r, err := m.svc.begin(c.Request().Context(), p)
	if err != nil {
		return err
	}
	c.Response().Header().Set("X-Run-Id", r.ID)
	if streamDefault && stream == nil || stream != nil && *stream {
		return m.streamRun(c, p, r)
	}
	out, failure := m.svc.execute(c.Request().Context(), p, r, nil)
	if failure != nil && failure.Status == http.StatusUnprocessableEntity {
		// A graph that cannot run on this input (template, router, transform, …): the error
		// envelope, with the run id so the failed record can be found.
		details := map[string]any{}
		if d, ok := failure.Details.(map[string]any); ok {
			for k, v := range d {
				details[k] = v
			}
		} else if failure.Details != nil {
			details["cause"] = failure.Details
		}
		details["runId"] = r.ID
		return failure.WithDetails(details)
	}
	res := immediateResult{RunID: r.ID, Status: out.Status, Output: out.Output, Note: out.Note}
	if out.Status == StatusFailed {
		res.Error = &RunError{Code: out.ErrorCode, Message: out.ErrorMessage}
	}
	return c.JSON(http.StatusOK, res)
}

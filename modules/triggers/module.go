package triggers

import (
	"context"
	_ "embed"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/httpx"
)

// Module serves /triggers and /hooks/{id} and runs the schedules (httpx.Starter).
type Module struct {
	svc   *Service
	sched *Scheduler
	log   zerolog.Logger
}

// New builds the module on a service and its scheduler.
func New(svc *Service, sched *Scheduler, logger zerolog.Logger) (*Module, error) {
	if svc == nil || sched == nil {
		return nil, errors.New("triggers: nil service or scheduler")
	}
	return &Module{svc: svc, sched: sched, log: logger}, nil
}

// Service returns the module's service.
func (m *Module) Service() *Service { return m.svc }

// Start starts the scheduler.
func (m *Module) Start(ctx context.Context) error { return m.sched.Start(ctx) }

// Stop stops the scheduler.
func (m *Module) Stop(ctx context.Context) error { return m.sched.Stop(ctx) }

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	g.POST("/triggers", m.create)
	g.GET("/triggers", m.list)
	g.GET("/triggers/:id", m.get)
	g.PATCH("/triggers/:id", m.update)
	g.DELETE("/triggers/:id", m.delete)
	g.POST("/hooks/:id", m.hook)
}

// resync applies a change made through this replica to its schedules at once. A failure
// is logged, not returned: the change is committed and the poller retries.
func (m *Module) resync(c echo.Context) {
	if err := m.sched.Sync(c.Request().Context()); err != nil {
		m.log.Warn().Err(err).Str("request_id", httpx.RequestID(c)).Msg("rescheduling triggers after a change")
	}
}

func (m *Module) create(c echo.Context) error {
	var in CreateInput
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	out, err := m.svc.Create(c.Request().Context(), in)
	if err != nil {
		return err
	}
	if out.Kind == KindSchedule {
		m.resync(c)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/triggers/"+out.ID)
	return c.JSON(http.StatusCreated, out)
}

func (m *Module) list(c echo.Context) error {
	p, err := httpx.ParsePage(c)
	if err != nil {
		return err
	}
	out, err := m.svc.List(c.Request().Context(), p.Limit, p.Before, c.QueryParam("agent_id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) get(c echo.Context) error {
	out, err := m.svc.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) update(c echo.Context) error {
	body, err := httpx.ReadBody(c)
	if err != nil {
		return err
	}
	out, err := m.svc.Update(c.Request().Context(), c.Param("id"), body)
	if err != nil {
		return err
	}
	if out.Kind == KindSchedule {
		m.resync(c)
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) delete(c echo.Context) error {
	if err := m.svc.Delete(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	m.resync(c)
	return c.NoContent(http.StatusNoContent)
}

// HookResponse is the body of an accepted webhook delivery.
type HookResponse struct {
	RunID string `json:"run_id"`
}

func (m *Module) hook(c echo.Context) error {
	body, err := httpx.ReadBody(c)
	if err != nil {
		return err
	}
	runID, err := m.svc.Deliver(c.Request().Context(), c.Param("id"), body, c.Request().Header.Get(SignatureHeader))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, HookResponse{RunID: runID})
}

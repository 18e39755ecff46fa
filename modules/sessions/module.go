package sessions

import (
	"bytes"
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/httpx"
)

// Module serves /sessions.
type Module struct {
	svc *Service
}

// New builds the module on a service.
func New(svc *Service) *Module {
	if svc == nil {
		panic("sessions: nil service") // a composition-root bug, caught at start
	}
	return &Module{svc: svc}
}

// Service returns the module's service (the runs module uses it for history).
func (m *Module) Service() *Service { return m.svc }

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	g.GET("/sessions", httpx.PageHandler(m.svc.List))
	g.POST("/sessions", m.ensure)
	g.GET("/sessions/:id", m.get)
	g.DELETE("/sessions/:id", m.delete)
	g.POST("/sessions/:id/turns", m.appendTurn)
}

func (m *Module) ensure(c echo.Context) error {
	var in EnsureInput
	// An empty body is allowed: it creates a session with a minted id.
	raw, err := httpx.ReadBody(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := httpx.DecodeJSON(raw, &in, true); err != nil {
			return err
		}
	}
	s, created, err := m.svc.Ensure(c.Request().Context(), in)
	if err != nil {
		return err
	}
	if created {
		c.Response().Header().Set(echo.HeaderLocation, "/sessions/"+s.ID)
		return c.JSON(http.StatusCreated, s)
	}
	return c.JSON(http.StatusOK, s)
}

func (m *Module) get(c echo.Context) error {
	s, err := m.svc.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s)
}

func (m *Module) appendTurn(c echo.Context) error {
	var in TurnInput
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	s, err := m.svc.AppendTurn(c.Request().Context(), c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, s)
}

func (m *Module) delete(c echo.Context) error {
	if err := m.svc.Delete(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

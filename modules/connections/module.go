package connections

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/httpx"
)

// Module serves /connections.
type Module struct {
	svc *Service
}

// New builds the module on a service.
func New(svc *Service) *Module {
	if svc == nil {
		panic("connections: nil service") // a composition-root bug, caught at start
	}
	return &Module{svc: svc}
}

// Service returns the module's service: the runtime's resolver and a secret store for
// `svc secrets rotate`.
func (m *Module) Service() *Service { return m.svc }

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	g.POST("/connections", m.create)
	g.GET("/connections", httpx.PageHandler(m.svc.List))
	g.GET("/connections/:id", m.get)
	g.PATCH("/connections/:id", m.update)
	g.DELETE("/connections/:id", m.delete)
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
	c.Response().Header().Set(echo.HeaderLocation, "/connections/"+out.ID)
	return c.JSON(http.StatusCreated, out)
}

func (m *Module) get(c echo.Context) error {
	out, err := m.svc.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) update(c echo.Context) error {
	var in UpdateInput
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	out, err := m.svc.Update(c.Request().Context(), c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) delete(c echo.Context) error {
	if err := m.svc.Delete(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

package credentials

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/httpx"
)

// Module serves /admin/credentials.
type Module struct {
	svc *Service
}

// NewModule mounts svc.
func NewModule(svc *Service) *Module {
	if svc == nil {
		panic("credentials.NewModule: nil service")
	}
	return &Module{svc: svc}
}

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	g.GET("/admin/credentials", m.list)
	g.PUT("/admin/credentials/:name", m.put)
	g.DELETE("/admin/credentials/:name", m.delete)
}

func (m *Module) list(c echo.Context) error {
	out, err := m.svc.List(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

type putBody struct {
	Value *string `json:"value"`
}

func (m *Module) put(c echo.Context) error {
	name := c.Param("name")
	if !ValidName(name) {
		return ErrInvalidName.Msg("credential name must be letters, digits and underscores, not starting with a digit, up to 128 characters")
	}
	var b putBody
	if err := httpx.BindJSON(c, &b); err != nil {
		return err
	}
	if b.Value == nil {
		return ErrInvalidValue.Msg("value is required")
	}
	created, err := m.svc.Set(c.Request().Context(), name, *b.Value)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, Credential{Name: name, HasValue: true})
}

func (m *Module) delete(c echo.Context) error {
	if err := m.svc.Delete(c.Request().Context(), c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

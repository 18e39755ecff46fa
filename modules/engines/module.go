package engines

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// Module serves GET /admin/engines.
type Module struct {
	svc *Service
}

// NewModule mounts svc.
func NewModule(svc *Service) *Module {
	if svc == nil {
		panic("engines.NewModule: nil service")
	}
	return &Module{svc: svc}
}

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	g.GET("/admin/engines", m.list)
}

// Listing is the body of GET /admin/engines.
type Listing struct {
	Engines     []Resident `json:"engines"`
	MaxResident int        `json:"maxResident"`
	Readiness   []Slot     `json:"readiness"`
}

func (m *Module) list(c echo.Context) error {
	return c.JSON(http.StatusOK, Listing{Engines: m.svc.Resident(), MaxResident: m.svc.MaxResident(), Readiness: m.svc.Slots()})
}

// Package agents serves the agent registry: immutable, content-addressed versions of the graph
// IR (see modules/graph), the IR's JSON Schema, and each agent's I/O capture policy.
package agents

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/httpx"
)

// Module serves /agents and /schemas/ir.json.
type Module struct {
	svc *Service
}

// New builds the module on a service.
func New(svc *Service) *Module {
	if svc == nil {
		panic("agents: nil service") // a composition-root bug, caught at start
	}
	return &Module{svc: svc}
}

// Service returns the module's service (version lookup for runs and triggers).
func (m *Module) Service() *Service { return m.svc }

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes. There are deliberately no DELETE routes: versions are
// permanent, and echo answers other methods on these paths with 405.
func (m *Module) Register(g *echo.Group) {
	g.GET("/schemas/ir.json", m.schema)
	g.POST("/agents", m.create)
	g.GET("/agents", httpx.PageHandler(m.svc.List))
	g.GET("/agents/:id", m.get)
	g.POST("/agents/:id/versions", m.publish)
	g.GET("/agents/:id/versions/:version", m.getVersion)
	g.GET("/agents/:id/io-policy", m.getPolicy)
	g.PUT("/agents/:id/io-policy", m.putPolicy)
}

func (m *Module) schema(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	return c.Blob(http.StatusOK, "application/schema+json", graph.SchemaJSON())
}

// createdAgent is the answer to POST /agents: the agent plus its first version.
type createdAgent struct {
	*Agent
	Version     string `json:"version"`
	ContentHash string `json:"content_hash"`
}

func (m *Module) create(c echo.Context) error {
	var in CreateInput
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	a, v, err := m.svc.Create(c.Request().Context(), in)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/agents/"+a.ID)
	return c.JSON(http.StatusCreated, createdAgent{Agent: a, Version: v.Version, ContentHash: v.ContentHash})
}

func (m *Module) get(c echo.Context) error {
	out, err := m.svc.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) publish(c echo.Context) error {
	var in PublishInput
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	v, created, err := m.svc.Publish(c.Request().Context(), c.Param("id"), in)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		c.Response().Header().Set(echo.HeaderLocation, "/agents/"+v.AgentID+"/versions/"+v.Version)
	}
	return c.JSON(status, v)
}

func (m *Module) getVersion(c echo.Context) error {
	out, err := m.svc.GetVersion(c.Request().Context(), c.Param("id"), c.Param("version"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) getPolicy(c echo.Context) error {
	out, err := m.svc.GetPolicy(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) putPolicy(c echo.Context) error {
	var in IOPolicy
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	out, err := m.svc.SetPolicy(c.Request().Context(), c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

package mcp

import (
	"context"
	_ "embed"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/httpx"
)

// Module serves /admin/mcp/servers.
type Module struct{ svc *Service }

// New builds the module over a Service.
func New(svc *Service) *Module { return &Module{svc: svc} }

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Start implements httpx.Starter.
func (m *Module) Start(ctx context.Context) error { return m.svc.Start(ctx) }

// Stop closes every tool-server session (stopping stdio processes).
func (m *Module) Stop(ctx context.Context) error { return m.svc.Stop(ctx) }

// Register mounts the routes. Actions are spelled /admin/mcp/servers/{name}:warm and
// {name}:close; echo cannot route a parameter followed by a literal, so POST on
// /admin/mcp/servers/:name splits the action off the last segment.
func (m *Module) Register(g *echo.Group) {
	g.GET("/admin/mcp/servers", m.list)
	g.PUT("/admin/mcp/servers/:name", m.put)
	g.GET("/admin/mcp/servers/:name", m.get)
	g.DELETE("/admin/mcp/servers/:name", m.delete)
	g.POST("/admin/mcp/servers/:name", m.action)
	g.GET("/admin/mcp/servers/:name/tools", m.tools)
}

func (m *Module) list(c echo.Context) error {
	servers, err := m.svc.List(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"servers": servers})
}

func (m *Module) put(c echo.Context) error {
	var cfg Config
	if err := httpx.BindJSON(c, &cfg); err != nil {
		return err
	}
	s, created, err := m.svc.Put(c.Request().Context(), c.Param("name"), cfg)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, s)
}

func (m *Module) get(c echo.Context) error {
	s, err := m.svc.Get(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s)
}

func (m *Module) delete(c echo.Context) error {
	if err := m.svc.Delete(c.Request().Context(), c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (m *Module) tools(c echo.Context) error {
	tools, err := m.svc.Tools(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"server": c.Param("name"), "tools": tools})
}

func (m *Module) action(c echo.Context) error {
	seg := c.Param("name")
	i := strings.LastIndex(seg, ":")
	if i < 0 {
		return apperr.ErrMethodNotAllowed.Msg("POST needs an action: /admin/mcp/servers/{name}:warm or {name}:close")
	}
	name, act := seg[:i], seg[i+1:]
	ctx := c.Request().Context()
	switch act {
	case "warm":
		s, err := m.svc.Warm(ctx, name)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, s)
	case "close":
		if _, err := m.svc.Get(ctx, name); err != nil {
			return err
		}
		m.svc.Close(name)
		s, err := m.svc.Get(ctx, name)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, s)
	}
	return apperr.ErrNotFound.Msg("unknown action %q: use :warm or :close", act)
}

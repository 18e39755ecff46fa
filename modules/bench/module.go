// Package bench is the bench store of the control plane: recorded benchmark and eval results
// of models and agents, per-metric comparison of two results, named parameter presets and
// golden-case suites (docs/api.md "Bench store").
package bench

import (
	_ "embed"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/httpx"
)

// Module serves /bench/*.
type Module struct {
	svc *Service
}

// New builds the module on a service.
func New(svc *Service) *Module {
	if svc == nil {
		panic("bench: nil service") // a composition-root bug, caught at start
	}
	return &Module{svc: svc}
}

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes. Results and suites have no update or delete: a result is a
// record of what happened and suites are what results point at.
func (m *Module) Register(g *echo.Group) {
	g.POST("/bench/runs", m.record)
	g.GET("/bench/runs", m.listResults)
	g.GET("/bench/runs/:id", m.getResult)
	g.GET("/bench/compare", m.compare)
	g.POST("/bench/presets", m.createPreset)
	g.GET("/bench/presets", httpx.PageHandler(m.svc.ListPresets))
	g.GET("/bench/presets/:name", m.getPreset)
	g.DELETE("/bench/presets/:name", m.deletePreset)
	g.POST("/bench/suites", m.createSuite)
	g.GET("/bench/suites", httpx.PageHandler(m.svc.ListSuites))
	g.GET("/bench/suites/:id", m.getSuite)
}

func (m *Module) record(c echo.Context) error {
	var in RecordInput
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	out, err := m.svc.Record(c.Request().Context(), in)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/bench/runs/"+out.ID)
	return c.JSON(http.StatusCreated, out)
}

func (m *Module) listResults(c echo.Context) error {
	p, err := httpx.ParsePage(c)
	if err != nil {
		return err
	}
	f := ResultFilter{
		LogicalID: c.QueryParam("logical_id"),
		AgentID:   c.QueryParam("agent_id"),
		SuiteID:   c.QueryParam("suite_id"),
		CaseID:    c.QueryParam("case_id"),
	}
	out, err := m.svc.ListResults(c.Request().Context(), f, p.Limit, p.Before)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) getResult(c echo.Context) error {
	out, err := m.svc.GetResult(c.Request().Context(), pathParam(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) compare(c echo.Context) error {
	out, err := m.svc.Compare(c.Request().Context(), c.QueryParam("a"), c.QueryParam("b"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) createPreset(c echo.Context) error {
	var in PresetInput
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	out, err := m.svc.CreatePreset(c.Request().Context(), in)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/bench/presets/"+out.Name)
	return c.JSON(http.StatusCreated, out)
}

func (m *Module) getPreset(c echo.Context) error {
	out, err := m.svc.GetPreset(c.Request().Context(), pathParam(c, "name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) deletePreset(c echo.Context) error {
	if err := m.svc.DeletePreset(c.Request().Context(), pathParam(c, "name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (m *Module) createSuite(c echo.Context) error {
	var in SuiteInput
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	out, err := m.svc.CreateSuite(c.Request().Context(), in)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/bench/suites/"+out.ID)
	return c.JSON(http.StatusCreated, out)
}

func (m *Module) getSuite(c echo.Context) error {
	out, err := m.svc.GetSuite(c.Request().Context(), pathParam(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// pathParam returns a path parameter unescaped; echo hands it over as it appeared in the
// request's raw path when that path had escapes. A value that does not unescape is returned
// as is, and then fails the name checks of the service (a 404).
func pathParam(c echo.Context, name string) string {
	v := c.Param(name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

package catalog

import (
	"context"
	_ "embed"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/httpx"
)

// Module serves /admin/catalog.
type Module struct {
	svc *Service
}

// NewModule mounts svc.
func NewModule(svc *Service) *Module {
	if svc == nil {
		panic("catalog.NewModule: nil service")
	}
	return &Module{svc: svc}
}

// Start implements httpx.Starter: it recovers jobs interrupted by a previous stop.
func (m *Module) Start(ctx context.Context) error { return m.svc.Start(ctx) }

// Stop fails in-flight downloads as interrupted and waits for them.
func (m *Module) Stop(context.Context) error { m.svc.Close(); return nil }

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes. A repository id owner/name is accepted both as two path
// segments and as one with the slash sent as %2F.
func (m *Module) Register(g *echo.Group) {
	g.GET("/admin/catalog/models", m.search)
	g.GET("/admin/catalog/models/:repo", m.model)
	g.GET("/admin/catalog/models/:owner/:name", m.model)
	g.POST("/admin/catalog/install", m.install)
	g.GET("/admin/catalog/downloads", m.jobs)
	g.GET("/admin/catalog/downloads/:id", m.job)
	g.POST("/admin/catalog/downloads/:id", m.action)
}

// Search limits.
const (
	defaultLimit = 20
	maxLimit     = 100
	maxSearchLen = 200
)

// parseQuery validates the search parameters; bad values are 400 invalid_request.
func parseQuery(q url.Values) (Query, error) {
	for k := range q {
		if !slices.Contains([]string{"search", "sort", "limit", "engines", "size", "modality"}, k) {
			return Query{}, apperr.Invalid("unknown query parameter %q (search, sort, limit, engines, size, modality)", clip(k))
		}
		if len(q[k]) > 1 {
			return Query{}, apperr.Invalid("query parameter %s is given more than once", k)
		}
	}
	out := Query{Search: strings.TrimSpace(q.Get("search")), Sort: "downloads", Limit: defaultLimit}
	if len(out.Search) > maxSearchLen {
		return Query{}, apperr.Invalid("search is longer than %d bytes", maxSearchLen)
	}
	if strings.IndexFunc(out.Search, unicode.IsControl) >= 0 {
		return Query{}, apperr.Invalid("search must not contain control characters")
	}
	if v := q.Get("sort"); v != "" {
		if _, ok := sortKeys[v]; !ok {
			return Query{}, apperr.Invalid("sort must be one of downloads, likes, lastModified")
		}
		out.Sort = v
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return Query{}, apperr.Invalid("limit must be an integer from 1 to %d", maxLimit)
		}
		out.Limit = n
	}
	if v := q.Get("engines"); v != "" {
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			if !slices.Contains(KnownEngines(), e) {
				return Query{}, apperr.Invalid("engines is a comma-separated list of %s", strings.Join(KnownEngines(), ", "))
			}
			if !slices.Contains(out.Engines, e) {
				out.Engines = append(out.Engines, e)
			}
		}
	}
	if v := q.Get("size"); v != "" {
		if err := validSize(v); err != nil {
			return Query{}, apperr.Invalid("%s", err.Error())
		}
		out.Size = v
	}
	if v := q.Get("modality"); v != "" {
		if !validModality(v) {
			return Query{}, apperr.Invalid("modality must be one of %s", strings.Join(modalities, ", "))
		}
		out.Modality = v
	}
	return out, nil
}

func (m *Module) search(c echo.Context) error {
	q, err := parseQuery(c.QueryParams())
	if err != nil {
		return err
	}
	res, err := m.svc.Search(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// repoParam decodes the repository from the path (one %2F-encoded segment or two).
func repoParam(c echo.Context) (string, error) {
	raw := c.Param("repo")
	if raw == "" {
		raw = c.Param("owner") + "/" + c.Param("name")
	}
	if c.Request().URL.RawPath == "" {
		return raw, nil
	}
	dec, err := url.PathUnescape(raw)
	if err != nil {
		return "", ErrInvalidRepo.Msg("the repository path is not validly percent-encoded")
	}
	return dec, nil
}

func (m *Module) model(c echo.Context) error {
	repo, err := repoParam(c)
	if err != nil {
		return err
	}
	d, err := m.svc.Model(c.Request().Context(), repo)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (m *Module) install(c echo.Context) error {
	var r InstallRequest
	if err := httpx.BindJSON(c, &r); err != nil {
		return err
	}
	j, err := m.svc.Install(c.Request().Context(), r)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/admin/catalog/downloads/"+j.JobID)
	return c.JSON(http.StatusAccepted, j)
}

func (m *Module) jobs(c echo.Context) error {
	js, err := m.svc.Jobs(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"downloads": js})
}

func (m *Module) job(c echo.Context) error {
	j, err := m.svc.Job(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, j)
}

// action serves POST /admin/catalog/downloads/{job_id}:cancel (echo cannot route the
// colon suffix, so the segment is split here).
func (m *Module) action(c echo.Context) error {
	seg := c.Param("id")
	i := strings.LastIndexByte(seg, ':')
	if i < 0 || seg[i+1:] != "cancel" {
		return apperr.ErrNotFound.Msg("no such action (POST /admin/catalog/downloads/{job_id}:cancel)")
	}
	j, err := m.svc.Cancel(c.Request().Context(), seg[:i])
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, j)
}

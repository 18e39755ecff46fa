package models

import (
	_ "embed"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/httpx"
)

// Module serves /admin/models.
type Module struct {
	svc *Service
}

// NewModule mounts svc.
func NewModule(svc *Service) *Module {
	if svc == nil {
		panic("models.NewModule: nil service")
	}
	return &Module{svc: svc}
}

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes. echo cannot route "/admin/models/:id:warm" (a param runs to the
// next "/"), so POST /admin/models/:id receives "{id}:warm" and "{id}:evict" and splits
// the segment on its last colon; ids may themselves contain colons.
func (m *Module) Register(g *echo.Group) {
	g.GET("/admin/models", m.list)
	g.GET("/admin/models/:id", m.get)
	g.PUT("/admin/models/:id", m.put)
	g.DELETE("/admin/models/:id", m.delete)
	g.POST("/admin/models/:id", m.action)
	g.GET("/admin/models/:id/capabilities", m.capabilities)
}

// pathID returns the id path segment decoded: echo hands over the raw segment when the
// path carries escapes such as %2F (a "/" inside an id), and the decoded one otherwise.
func pathID(c echo.Context) (string, error) {
	id := c.Param("id")
	if c.Request().URL.RawPath == "" {
		return id, nil
	}
	dec, err := url.PathUnescape(id)
	if err != nil {
		return "", ErrInvalidModelID.Msg("the id path segment is not validly percent-encoded")
	}
	return dec, nil
}

// View is a model as the admin API shows it: the registration plus its live state.
type View struct {
	*Model
	State       string `json:"state"`
	StateDetail string `json:"stateDetail,omitempty"`
}

func (m *Module) view(c echo.Context, mod *Model) View {
	st := m.svc.State(c.Request().Context(), mod)
	return View{Model: mod, State: st.State, StateDetail: st.Detail}
}

func (m *Module) list(c echo.Context) error {
	ms, err := m.svc.List(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]View, 0, len(ms))
	for _, mod := range ms {
		out = append(out, m.view(c, mod))
	}
	return c.JSON(http.StatusOK, map[string]any{"models": out})
}

func (m *Module) get(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	mod, err := m.svc.Resolve(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m.view(c, mod))
}

func (m *Module) put(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if !ValidID(id) {
		return ErrInvalidModelID.Msg("logical id must match [a-zA-Z0-9][a-zA-Z0-9._:/-]{0,127} (encode / as %%2F in the URL path)")
	}
	var spec Spec
	if err := httpx.BindJSON(c, &spec); err != nil {
		return err
	}
	mod, created, err := m.svc.Put(c.Request().Context(), id, &spec)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, m.view(c, mod))
}

func (m *Module) delete(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := m.svc.Delete(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// ActionResult answers POST /admin/models/{id}:warm and :evict.
type ActionResult struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	State  string `json:"state"`
	// Detail says what happened; for hosted models, that the action was a no-op.
	Detail string `json:"detail,omitempty"`
}

func (m *Module) action(c echo.Context) error {
	seg, err := pathID(c)
	if err != nil {
		return err
	}
	i := strings.LastIndex(seg, ":")
	if i <= 0 {
		return ErrUnknownAction.Msg("POST needs an action: /admin/models/{id}:warm or /admin/models/{id}:evict")
	}
	id, action := seg[:i], seg[i+1:]
	ctx := c.Request().Context()
	var st State
	switch action {
	case "warm":
		_, st, err = m.svc.Warm(ctx, id)
	case "evict":
		_, st, err = m.svc.Evict(ctx, id)
	default:
		return ErrUnknownAction.Msg("unknown action %q: use /admin/models/{id}:warm or /admin/models/{id}:evict", clip(action))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ActionResult{ID: id, Action: action, State: st.State, Detail: st.Detail})
}

func (m *Module) capabilities(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	refresh := false
	if s := c.QueryParam("refresh"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return apperr.Invalid("refresh must be true or false")
		}
		refresh = b
	}
	caps, err := m.svc.Capabilities(c.Request().Context(), id, refresh)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, caps)
}

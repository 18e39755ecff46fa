package artifacts

import (
	_ "embed"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/httpx"
)

// Module serves POST /artifacts and GET/HEAD /artifacts/{ref}.
type Module struct {
	svc *Service
}

// New builds the module on a service.
func New(svc *Service) *Module {
	if svc == nil {
		panic("artifacts: nil service") // a composition-root bug, caught at start
	}
	return &Module{svc: svc}
}

// Service returns the module's service (for other modules that store blobs).
func (m *Module) Service() *Service { return m.svc }

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	g.POST("/artifacts", m.upload)
	g.GET("/artifacts/:ref", m.download)
	g.HEAD("/artifacts/:ref", m.download)
}

// SkipBodyLimit tells the plane-wide JSON body limit to leave uploads alone: the upload
// route applies its own, larger limit (SERVICE_ARTIFACT_MAX_BYTES) while streaming.
func SkipBodyLimit(c echo.Context) bool {
	return c.Request().Method == http.MethodPost && c.Path() == "/artifacts"
}

func (m *Module) upload(c echo.Context) error {
	r := c.Request()
	ct, err := ParseContentType(r.Header.Get(echo.HeaderContentType))
	if err != nil {
		return err
	}
	limit := m.svc.MaxBytes()
	if r.ContentLength > limit {
		return httpx.ErrTooLarge(limit)
	}
	var body io.Reader = http.NoBody
	if r.Body != nil {
		// MaxBytesReader also tells the server to close the connection instead of draining
		// the rest of an oversized body.
		body = http.MaxBytesReader(c.Response(), r.Body, limit)
	}
	a, err := m.svc.Put(r.Context(), ct, body)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/artifacts/"+a.Ref)
	return c.JSON(http.StatusCreated, a)
}

func (m *Module) download(c echo.Context) error {
	a, f, err := m.svc.Open(c.Request().Context(), c.Param("ref"))
	if err != nil {
		return err
	}
	defer f.Close()
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, a.ContentType)
	h.Set("ETag", `"`+a.SHA256+`"`)
	h.Set(echo.HeaderXContentTypeOptions, "nosniff")
	// A blob is served from the control plane's origin: a sandboxing CSP keeps an uploaded
	// text/html or SVG from running script there, while <img>/<audio> embedding still works.
	h.Set(echo.HeaderContentSecurityPolicy, "default-src 'none'; sandbox")
	// Refs are never reused and blobs never change.
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	// ServeContent answers If-None-Match (304), Range and HEAD and sets Content-Length.
	// Its refusals (416 for an unsatisfiable Range, 412 for a failed precondition) are plain
	// text; the guard holds them back so they leave as the error envelope instead.
	g := &refusalGuard{ResponseWriter: c.Response()}
	http.ServeContent(g, c.Request(), "", time.Time{}, f)
	if g.status == 0 {
		return nil
	}
	for _, k := range []string{echo.HeaderContentType, echo.HeaderContentLength, "ETag", "Cache-Control", echo.HeaderXContentTypeOptions} {
		h.Del(k)
	}
	switch g.status {
	case http.StatusRequestedRangeNotSatisfiable:
		// Content-Range (bytes */size) stays: it tells the client the blob's size.
		return ErrRangeNotSatisfiable.Msg("the Range header does not overlap the %d-byte artifact", a.Bytes)
	case http.StatusPreconditionFailed:
		return ErrPreconditionFailed
	}
	return apperr.New(g.status, "invalid_request", http.StatusText(g.status))
}

// refusalGuard passes a response through unless its status is an error, which it records
// and withholds (status and body) for the error handler to answer in the envelope.
type refusalGuard struct {
	http.ResponseWriter
	status int
}

func (g *refusalGuard) WriteHeader(code int) {
	if code >= 400 {
		g.status = code
		return
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *refusalGuard) Write(b []byte) (int, error) {
	if g.status != 0 {
		return len(b), nil
	}
	return g.ResponseWriter.Write(b)
}

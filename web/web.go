// Package web serves the browser UI from the control plane: static files embedded in the
// binary (plain HTML, CSS and JavaScript modules; the committed files are the production
// build), the UI's configuration, and a same-origin pass-through to the inference plane's
// admin API so that the models pages need no CORS setup.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/httpx"
)

//go:embed static
var staticFiles embed.FS

//go:embed openapi.json
var openapiDoc []byte

// ProxyPrefix is where the inference plane's /admin/* and /v1/models are passed through.
const ProxyPrefix = "/ui/inference"

// contentSecurityPolicy keeps the UI to its own origin: every API call, the inference
// pass-through included, is same-origin, and no inline script or style is used.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// contentTypes is explicit so that module scripts never depend on the host's mime tables.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
	".ico":  "image/x-icon",
	".png":  "image/png",
}

// Module serves /ui/ and the pass-through.
type Module struct {
	files        fs.FS
	etags        map[string]string
	inferenceURL *url.URL
	client       *http.Client
}

// New builds the module for an inference plane at inferenceURL (cfg.InferenceURL).
func New(inferenceURL string) (*Module, error) {
	u, err := url.Parse(strings.TrimRight(inferenceURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("web: inference URL must be an absolute http(s) URL")
	}
	files, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	etags := map[string]string{}
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		etags[p] = `"` + hex.EncodeToString(sum[:16]) + `"`
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Module{
		files:        files,
		etags:        etags,
		inferenceURL: u,
		client: &http.Client{
			// No overall timeout: a capabilities probe makes several upstream calls of up to
			// 30 s each. The browser's request context bounds it; connecting is bounded here.
			Transport: &http.Transport{
				Proxy:       http.ProxyFromEnvironment,
				DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	toUI := func(c echo.Context) error { return c.Redirect(http.StatusFound, "/ui/") }
	g.GET("/", toUI)
	g.GET("/ui", toUI)
	g.GET("/ui/", m.asset)
	g.GET("/ui/*", m.asset)
	g.GET("/ui/config.json", m.config)
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete} {
		g.Add(method, ProxyPrefix+"/*", m.proxy)
	}
}

func (m *Module) config(c echo.Context) error {
	// Redacted: an inference URL with user info must not reach the browser.
	return c.JSON(http.StatusOK, map[string]string{
		"inferenceUrl":   m.inferenceURL.Redacted(),
		"inferenceProxy": ProxyPrefix,
	})
}

func (m *Module) asset(c echo.Context) error {
	name := strings.TrimPrefix(c.Request().URL.Path, "/ui/")
	if name == "" {
		name = "index.html"
	}
	etag, ok := m.etags[name]
	if !ok || !fs.ValidPath(name) {
		return ErrAssetNotFound.Msg("no UI file %q", name)
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", etag)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("Referrer-Policy", "no-referrer")
	if c.Request().Header.Get("If-None-Match") == etag {
		return c.NoContent(http.StatusNotModified)
	}
	b, err := fs.ReadFile(m.files, name)
	if err != nil {
		return err
	}
	ct, ok := contentTypes[path.Ext(name)]
	if !ok {
		ct = "application/octet-stream"
	}
	return c.Blob(http.StatusOK, ct, b)
}

// proxy passes /ui/inference/admin/* and /ui/inference/v1/models to the inference plane,
// keeping the path's encoding (model ids carry %2F), the query, the body and the answer.
func (m *Module) proxy(c echo.Context) error {
	r := c.Request()
	rest := strings.TrimPrefix(r.URL.EscapedPath(), ProxyPrefix)
	if !proxiedPath(rest) {
		return ErrNotProxied
	}
	rawPath := strings.TrimRight(m.inferenceURL.EscapedPath(), "/") + rest
	plain, err := url.PathUnescape(rawPath)
	if err != nil {
		return ErrNotProxied
	}
	target := *m.inferenceURL
	target.Path, target.RawPath, target.RawQuery = plain, rawPath, r.URL.RawQuery
	var body io.Reader
	if r.Method == http.MethodPut || r.Method == http.MethodPost {
		body = r.Body
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), body)
	if err != nil {
		return err
	}
	req.ContentLength = r.ContentLength
	if body == nil {
		req.ContentLength = 0
	}
	for _, k := range []string{"Content-Type", "Accept"} {
		if v := r.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set(httpx.HeaderRequestID, httpx.RequestID(c))
	resp, err := m.client.Do(req)
	if err != nil {
		if r.Context().Err() != nil {
			return r.Context().Err()
		}
		return ErrInferenceUnavailable.Msg("the inference plane is unreachable at %s", m.inferenceURL.Redacted()).Wrap(err)
	}
	defer resp.Body.Close()
	h := c.Response().Header()
	for _, k := range []string{"Content-Type", "Content-Length"} {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	c.Response().WriteHeader(resp.StatusCode)
	_, err = io.Copy(c.Response(), resp.Body)
	return err
}

// proxiedPath reports whether an escaped path (after ProxyPrefix) may be passed through:
// /v1/models, or a path under /admin/ without empty, "." or ".." segments (escaped ones
// included, so that no spelling reaches another route of the inference plane).
func proxiedPath(escaped string) bool {
	if escaped == "/v1/models" {
		return true
	}
	rest, ok := strings.CutPrefix(escaped, "/admin/")
	if !ok {
		return false
	}
	for _, seg := range strings.Split(rest, "/") {
		s, err := url.PathUnescape(seg)
		if err != nil || s == "" || s == "." || s == ".." || strings.ContainsAny(s, "\\?#") {
			return false
		}
	}
	return true
}

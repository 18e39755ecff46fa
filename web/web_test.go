package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/svc-dev/svc/platform/testkit"
)

func uiServer(t *testing.T, inferenceURL string) *testkit.Server {
	t.Helper()
	m, err := New(inferenceURL)
	if err != nil {
		t.Fatal(err)
	}
	return testkit.New(t, testkit.Options{}, m)
}

func noRedirect() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func TestRootRedirectsToUI(t *testing.T) {
	s := uiServer(t, "http://127.0.0.1:1")
	for _, p := range []string{"/", "/ui"} {
		resp, err := noRedirect().Get(s.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
			t.Fatalf("GET %s: %d Location %q", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

var (
	htmlRef   = regexp.MustCompile(`(?:href|src)="([^"#:]+)"`)
	jsImport  = regexp.MustCompile(`(?m)^\s*import\s+(?:[^'"]*\sfrom\s+)?['"](\.[^'"]+)['"]`)
	wantTypes = map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
)

// TestIndexAndEveryReferencedFile follows index.html's references and every module import
// from there on: each must be served with its content type (a module script served with a
// non-JavaScript type does not run).
func TestIndexAndEveryReferencedFile(t *testing.T) {
	s := uiServer(t, "http://127.0.0.1:1")
	r := s.Do("GET", "/ui/", nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /ui/: %d %q", r.Status, r.Header.Get("Content-Type"))
	}
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("CSP %q", csp)
	}
	if r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatal("missing nosniff")
	}
	seen := map[string]bool{}
	var queue []string
	for _, m := range htmlRef.FindAllStringSubmatch(string(r.Body), -1) {
		queue = append(queue, m[1])
	}
	if len(queue) < 3 {
		t.Fatalf("index.html references %v", queue)
	}
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		if seen[ref] {
			continue
		}
		seen[ref] = true
		fr := s.Do("GET", "/ui/"+ref, nil)
		if fr.Status != 200 {
			t.Fatalf("GET /ui/%s: %d %s", ref, fr.Status, fr.Body)
		}
		if want := wantTypes[path.Ext(ref)]; fr.Header.Get("Content-Type") != want {
			t.Fatalf("/ui/%s: Content-Type %q, want %q", ref, fr.Header.Get("Content-Type"), want)
		}
		if path.Ext(ref) == ".js" {
			for _, m := range jsImport.FindAllStringSubmatch(string(fr.Body), -1) {
				queue = append(queue, path.Join(path.Dir(ref), m[1]))
			}
		}
	}
	for _, want := range []string{"app.js", "style.css", "lib/api.js", "lib/dom.js", "pages/runs.js", "pages/models.js",
		"pages/catalog.js", "pages/mcp.js", "pages/bench.js", "pages/artifacts.js"} {
		if !seen[want] {
			t.Fatalf("%s not reached from index.html (reached %v)", want, seen)
		}
	}
	// Every embedded file is reachable: no dead files ship in the binary.
	m, _ := New("http://127.0.0.1:1")
	for name := range m.etags {
		if name != "index.html" && !seen[name] {
			t.Errorf("embedded file %s is referenced by nothing", name)
		}
	}
}

func TestAssetCachingAndMisses(t *testing.T) {
	s := uiServer(t, "http://127.0.0.1:1")
	r := s.Do("GET", "/ui/app.js", nil)
	etag := r.Header.Get("ETag")
	if etag == "" || r.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q Cache-Control %q", etag, r.Header.Get("Cache-Control"))
	}
	if r := s.Do("GET", "/ui/app.js", nil, "If-None-Match: "+etag); r.Status != http.StatusNotModified || len(r.Body) != 0 {
		t.Fatalf("conditional GET: %d", r.Status)
	}
	for _, p := range []string{"/ui/nope.js", "/ui/lib/", "/ui/lib", "/ui/../web.go", "/ui/%2e%2e/web.go", "/ui/static/app.js"} {
		r := s.Do("GET", p, nil)
		if r.Status != 404 || r.ErrorCode() != "not_found" {
			t.Fatalf("GET %s: %d %s", p, r.Status, r.Body)
		}
	}
}

func TestConfigRedactsUserInfo(t *testing.T) {
	s := uiServer(t, "http://user:hunter2@127.0.0.1:8081/")
	r := s.Do("GET", "/ui/config.json", nil)
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	var cfg map[string]string
	r.JSON(t, &cfg)
	if cfg["inferenceProxy"] != "/ui/inference" || strings.Contains(string(r.Body), "hunter2") || !strings.HasPrefix(cfg["inferenceUrl"], "http://user:") {
		t.Fatalf("config %s", r.Body)
	}
}

func TestNewRefusesBadInferenceURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8081", "ftp://x", "http://"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

// upstream records what the fake inference plane received.
type upstream struct {
	mu   sync.Mutex
	reqs []string
}

func (u *upstream) server(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, r.Method+" "+r.URL.EscapedPath()+"?"+r.URL.RawQuery+" "+r.Header.Get("Content-Type")+" "+string(body))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Set-Cookie", "x=y")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestProxyPassesAdminAndModelsOnly(t *testing.T) {
	var up upstream
	s := uiServer(t, up.server(t).URL)
	r := s.Do("PUT", "/ui/inference/admin/models/org%2Fm", `{"model":"m"}`)
	if r.Status != 201 || string(r.Body) != `{"ok":true}` || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("PUT: %d %q %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if r.Header.Get("Set-Cookie") != "" {
		t.Fatal("upstream headers beyond the content type must not pass")
	}
	s.Do("GET", "/ui/inference/admin/models/qwen2.5:7b/capabilities?refresh=true", nil)
	s.Do("GET", "/ui/inference/v1/models", nil)
	s.Do("DELETE", "/ui/inference/admin/credentials/KEY", nil)
	want := []string{
		`PUT /admin/models/org%2Fm? application/json {"model":"m"}`,
		`GET /admin/models/qwen2.5:7b/capabilities?refresh=true  `,
		`GET /v1/models?  `,
		`DELETE /admin/credentials/KEY?  `,
	}
	if strings.Join(up.reqs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("upstream got\n%s\nwant\n%s", strings.Join(up.reqs, "\n"), strings.Join(want, "\n"))
	}
	for _, p := range []string{
		"/ui/inference/v1/chat/completions", "/ui/inference/v1/models/x", "/ui/inference/admin/",
		"/ui/inference/admin/../v1/chat/completions", "/ui/inference/admin/%2e%2e/v1/chat/completions",
		"/ui/inference/admin/models/.%2E/x", "/ui/inference/admin//models", "/ui/inference/healthz", "/ui/inference/",
	} {
		r := s.Do("POST", p, `{}`)
		if r.Status != 404 || r.ErrorCode() != "not_found" {
			t.Fatalf("POST %s: %d %s", p, r.Status, r.Body)
		}
	}
	if len(up.reqs) != len(want) {
		t.Fatalf("refused paths reached the upstream: %v", up.reqs[len(want):])
	}
}

func TestProxyUnreachableInference(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	addr := dead.URL
	dead.Close()
	s := uiServer(t, addr)
	r := s.Do("GET", "/ui/inference/admin/models", nil)
	if r.Status != 503 || r.ErrorCode() != "inference_unavailable" {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
}

// FuzzProxiedPath: an accepted path is /v1/models or, once unescaped and cleaned, still a
// path strictly under /admin/ (no spelling reaches another route of the inference plane).
func FuzzProxiedPath(f *testing.F) {
	for _, s := range []string{"/v1/models", "/admin/models", "/admin/models/org%2Fm", "/admin/../v1", "/admin/%2e%2e/v1",
		"/admin/a/%2E./b", "/admin//x", "/admin/x%zz", "/v1/models/", "/admin/a%2F..%2Fb", "/admin/a/..%2f..%2fv1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, escaped string) {
		if !proxiedPath(escaped) || escaped == "/v1/models" {
			return
		}
		plain, err := url.PathUnescape(escaped)
		if err != nil {
			t.Fatalf("accepted a path that does not unescape: %q", escaped)
		}
		if !strings.HasPrefix(path.Clean(plain), "/admin/") && !strings.Contains(escaped, "%2F") && !strings.Contains(escaped, "%2f") {
			t.Fatalf("%q cleans to %q", escaped, path.Clean(plain))
		}
		u := &url.URL{Scheme: "http", Host: "x", Path: plain, RawPath: escaped}
		if got := u.EscapedPath(); !strings.HasPrefix(got, "/admin/") {
			t.Fatalf("%q is sent as %q", escaped, got)
		}
		for _, seg := range strings.Split(escaped, "/")[1:] {
			if s, _ := url.PathUnescape(seg); s == ".." || s == "." {
				t.Fatalf("%q holds a dot segment", escaped)
			}
		}
	})
}

package runs

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzAuthorize: only "Bearer <token>" (scheme in any case, spaces around the token) opens
// invoke, and an empty configured token never does.
func FuzzAuthorize(f *testing.F) {
	for _, s := range []string{"Bearer tok", "bearer tok", "BEARER  tok ", "Bearer", "Bearer ", "tok", "Basic tok", "Bearer tok2", "Bearer\ttok", ""} {
		f.Add(s)
	}
	open := &Module{}
	m := New(&Service{}, ModuleOptions{InvokeToken: "tok"})
	f.Fuzz(func(t *testing.T, header string) {
		r, _ := http.NewRequest(http.MethodPost, "/agents/a/invoke", nil)
		r.Header["Authorization"] = []string{header}
		if open.authorize(r) == nil {
			t.Fatalf("closed invoke accepted %q", header)
		}
		scheme, tok, _ := strings.Cut(header, " ")
		want := strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) == "tok"
		if got := m.authorize(r) == nil; got != want {
			t.Fatalf("authorize(%q) = %v, want %v", header, got, want)
		}
	})
}

// FuzzValidHash accepts exactly sha256: followed by 64 lowercase hex digits.
func FuzzValidHash(f *testing.F) {
	for _, s := range []string{"sha256:" + strings.Repeat("a", 64), "sha256:" + strings.Repeat("A", 64), "sha256:", "md5:x", strings.Repeat("0", 71)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if !validHash(h) {
			return
		}
		if len(h) != 71 || !strings.HasPrefix(h, "sha256:") || strings.Trim(h[7:], "0123456789abcdef") != "" {
			t.Fatalf("accepted %q", h)
		}
	})
}

package artifacts_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/artifacts"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/httpx"
	"github.com/svc-dev/svc/platform/testkit"
)

type bundle struct {
	srv  *testkit.Server
	db   *database.DB
	dir  string
	data string
}

// setup mounts the module behind the real HTTP stack with a small JSON body limit, so that
// the tests also prove uploads bypass it and use their own limit.
func setup(t testing.TB, db *database.DB, maxBytes int64) *bundle {
	t.Helper()
	data := t.TempDir()
	dir := filepath.Join(data, "artifacts")
	svc, err := artifacts.NewService(db, dir, maxBytes, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv := testkit.New(t, testkit.Options{Options: httpx.Options{BodyLimit: 1 << 10, BodyLimitSkip: artifacts.SkipBodyLimit}}, artifacts.New(svc))
	return &bundle{srv: srv, db: db, dir: dir, data: data}
}

// post uploads body (streamed; size -1 means unknown length, i.e. chunked) with ct ("" = no header).
func post(t testing.TB, base string, body io.Reader, size int64, ct string) *testkit.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/artifacts", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	if size < 0 {
		req.ContentLength = -1
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /artifacts: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return &testkit.Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

func (b *bundle) rows(t testing.TB) int64 {
	t.Helper()
	var n int64
	if err := b.db.Table("artifacts").Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// files counts regular files under the artifact folder, temp files included.
func (b *bundle) files(t testing.TB) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(b.dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

type uploaded struct {
	Ref         string `json:"ref"`
	ContentType string `json:"contentType"`
	Bytes       int64  `json:"bytes"`
}

func TestUploadDownload(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, 1<<20)
		payload := []byte("RIFF\x00\x01fake wav bytes, larger than the 1 KiB JSON limit: " + strings.Repeat("x", 4096))

		r := post(t, b.srv.URL, bytes.NewReader(payload), int64(len(payload)), "audio/wav")
		if r.Status != http.StatusCreated {
			t.Fatalf("upload: %d %s", r.Status, r.Body)
		}
		var a uploaded
		r.JSON(t, &a)
		if !strings.HasPrefix(a.Ref, "art_") || !artifacts.ValidRef(a.Ref) || a.ContentType != "audio/wav" || a.Bytes != int64(len(payload)) {
			t.Fatalf("upload answer: %+v", a)
		}
		if got := r.Header.Get("Location"); got != "/artifacts/"+a.Ref {
			t.Fatalf("Location %q", got)
		}

		g := b.srv.Do(http.MethodGet, "/artifacts/"+a.Ref, nil)
		sum := sha256.Sum256(payload)
		etag := `"` + hex.EncodeToString(sum[:]) + `"`
		if g.Status != http.StatusOK || !bytes.Equal(g.Body, payload) {
			t.Fatalf("download: %d, %d bytes", g.Status, len(g.Body))
		}
		for k, want := range map[string]string{
			"Content-Type":           "audio/wav",
			"Content-Length":         fmt.Sprint(len(payload)),
			"ETag":                   etag,
			"X-Content-Type-Options": "nosniff",
		} {
			if got := g.Header.Get(k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		if !strings.Contains(g.Header.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("no sandbox CSP: %q", g.Header.Get("Content-Security-Policy"))
		}

		nm := b.srv.Do(http.MethodGet, "/artifacts/"+a.Ref, nil, "If-None-Match: "+etag)
		if nm.Status != http.StatusNotModified || len(nm.Body) != 0 {
			t.Fatalf("If-None-Match: %d %q", nm.Status, nm.Body)
		}
		other := b.srv.Do(http.MethodGet, "/artifacts/"+a.Ref, nil, `If-None-Match: "nope"`)
		if other.Status != http.StatusOK {
			t.Fatalf("non-matching If-None-Match: %d", other.Status)
		}
		h := b.srv.Do(http.MethodHead, "/artifacts/"+a.Ref, nil)
		if h.Status != http.StatusOK || h.Header.Get("Content-Length") != fmt.Sprint(len(payload)) || len(h.Body) != 0 {
			t.Fatalf("HEAD: %d %v", h.Status, h.Header)
		}
		rg := b.srv.Do(http.MethodGet, "/artifacts/"+a.Ref, nil, "Range: bytes=0-3")
		if rg.Status != http.StatusPartialContent || string(rg.Body) != "RIFF" {
			t.Fatalf("Range: %d %q", rg.Status, rg.Body)
		}
		// ServeContent's own refusals leave in the error envelope, not as plain text.
		for _, tc := range []struct {
			header, code string
			status       int
		}{
			{"Range: bytes=999999-", "range_not_satisfiable", http.StatusRequestedRangeNotSatisfiable},
			{`If-Match: "nope"`, "precondition_failed", http.StatusPreconditionFailed},
		} {
			r := b.srv.Do(http.MethodGet, "/artifacts/"+a.Ref, nil, tc.header)
			if r.Status != tc.status || r.ErrorCode() != tc.code || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%s: %d %s %q", tc.header, r.Status, r.Header.Get("Content-Type"), r.Body)
			}
			if r.Header.Get("Cache-Control") != "" || r.Header.Get("ETag") != "" {
				t.Fatalf("%s: an error is cached as the immutable blob: %v", tc.header, r.Header)
			}
		}
		if r := b.srv.Do(http.MethodGet, "/artifacts/"+a.Ref, nil, "Range: bytes=999999-"); r.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", len(payload)) {
			t.Fatalf("416 without Content-Range: %v", r.Header)
		}
		if r := b.srv.Do(http.MethodHead, "/artifacts/"+a.Ref, nil, "Range: bytes=999999-"); r.Status != http.StatusRequestedRangeNotSatisfiable || len(r.Body) != 0 {
			t.Fatalf("HEAD 416: %d %q", r.Status, r.Body)
		}
	})
}

func TestContentType(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, 1<<20)
		cases := []struct {
			header, want string
		}{
			{"", "application/octet-stream"},
			{"image/png", "image/png"},
			{"Text/Plain; Charset=UTF-8", "text/plain; charset=UTF-8"},
		}
		for _, c := range cases {
			r := post(t, b.srv.URL, strings.NewReader("abc"), 3, c.header)
			if r.Status != http.StatusCreated {
				t.Fatalf("%q: %d %s", c.header, r.Status, r.Body)
			}
			var a uploaded
			r.JSON(t, &a)
			if a.ContentType != c.want {
				t.Errorf("%q stored as %q, want %q", c.header, a.ContentType, c.want)
			}
			g := b.srv.Do(http.MethodGet, "/artifacts/"+a.Ref, nil)
			if got := g.Header.Get("Content-Type"); got != c.want {
				t.Errorf("%q served as %q", c.header, got)
			}
		}
		before, files := b.rows(t), b.files(t)
		for _, bad := range []string{"garbage", "image/", "/png", "text/plain; charset", "a/b; =x", strings.Repeat("a", 300) + "/b"} {
			r := post(t, b.srv.URL, strings.NewReader("abc"), 3, bad)
			if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_content_type" {
				t.Errorf("%q: %d %s", bad, r.Status, r.Body)
			}
		}
		if b.rows(t) != before || b.files(t) != files {
			t.Fatal("a rejected upload left something behind")
		}
	})
}

func TestTooLarge(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		const limit = 256 << 10
		b := setup(t, db, limit)
		exact := post(t, b.srv.URL, bytes.NewReader(make([]byte, limit)), limit, "application/octet-stream")
		if exact.Status != http.StatusCreated {
			t.Fatalf("exactly the limit: %d %s", exact.Status, exact.Body)
		}
		rows, files := b.rows(t), b.files(t)

		// Declared too large: refused before reading.
		r := post(t, b.srv.URL, bytes.NewReader(make([]byte, limit+1)), limit+1, "")
		if r.Status != http.StatusRequestEntityTooLarge || r.ErrorCode() != "payload_too_large" {
			t.Fatalf("declared: %d %s", r.Status, r.Body)
		}
		// Unknown length (chunked): refused while streaming, partial file removed.
		r = post(t, b.srv.URL, io.LimitReader(zeros{}, 3*limit), -1, "")
		if r.Status != http.StatusRequestEntityTooLarge || r.ErrorCode() != "payload_too_large" {
			t.Fatalf("chunked: %d %s", r.Status, r.Body)
		}
		if b.rows(t) != rows || b.files(t) != files {
			t.Fatalf("oversized uploads left rows=%d files=%d (want %d, %d)", b.rows(t), b.files(t), rows, files)
		}
	})
}

func TestRefsNeverEscape(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, 1<<20)
		// Something worth stealing next to and above the artifact folder.
		secret := "TOP-SECRET-CONTENT"
		for _, p := range []string{filepath.Join(b.data, "svc.db"), filepath.Join(b.dir, "tmp", "x"), filepath.Join(b.dir, "passwd")} {
			if err := os.WriteFile(p, []byte(secret), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		r := post(t, b.srv.URL, strings.NewReader("ok"), 2, "text/plain")
		var a uploaded
		r.JSON(t, &a)
		hex := a.Ref[len("art_"):]

		paths := []string{
			"/artifacts/x",
			"/artifacts/art_",
			"/artifacts/passwd",
			"/artifacts/svc.db",
			"/artifacts/..%2fsvc.db",
			"/artifacts/..%2F..%2Fsvc.db",
			"/artifacts/%2e%2e%2fsvc.db",
			"/artifacts/art_..%2f..%2fsvc.db",
			"/artifacts/art_%2e%2e%2fsvc.db",
			"/artifacts/art_" + hex + "%2f..%2f..%2fsvc.db",
			"/artifacts/art_" + strings.ToUpper(hex),
			"/artifacts/ART_" + hex,
			"/artifacts/art_" + hex + "x",
			"/artifacts/art_" + hex[:31],
			"/artifacts/art_0123456789abcdef0123456789abcdef", // well formed, never minted
			"/artifacts/" + hex,
			"/artifacts/tmp",
			"/artifacts/art_%5c..%5csvc.db",
		}
		for _, p := range paths {
			g := b.srv.Do(http.MethodGet, p, nil)
			if strings.Contains(string(g.Body), secret) {
				t.Fatalf("%s leaked a file outside the store", p)
			}
			if g.Status != http.StatusNotFound {
				t.Errorf("%s: %d %s", p, g.Status, g.Body)
			}
		}
		// A NUL in the URL is refused by the shared stack before any lookup.
		if g := b.srv.Do(http.MethodGet, "/artifacts/art_"+hex+"%00", nil); g.Status != http.StatusBadRequest || strings.Contains(string(g.Body), secret) {
			t.Errorf("NUL ref: %d %s", g.Status, g.Body)
		}
		// Sanity: the real ref is served.
		if g := b.srv.Do(http.MethodGet, "/artifacts/"+a.Ref, nil); g.Status != http.StatusOK || string(g.Body) != "ok" {
			t.Fatalf("real ref: %d %q", g.Status, g.Body)
		}
	})
}

func TestMissingFileIsNotFound(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	b := setup(t, db, 1<<20)
	r := post(t, b.srv.URL, strings.NewReader("gone"), 4, "")
	var a uploaded
	r.JSON(t, &a)
	if err := os.RemoveAll(filepath.Join(b.dir, a.Ref[4:6])); err != nil {
		t.Fatal(err)
	}
	if g := b.srv.Do(http.MethodGet, "/artifacts/"+a.Ref, nil); g.Status != http.StatusNotFound || g.ErrorCode() != "artifact_not_found" {
		t.Fatalf("%d %s", g.Status, g.Body)
	}
}

// pattern is a deterministic, allocation-free byte source (so a test or benchmark can
// stream tens of megabytes without holding them): a 4093-byte block (prime length, so it
// never lines up with buffer sizes) repeated.
type pattern struct {
	block []byte
	off   int
}

func newPattern() *pattern {
	b := make([]byte, 4093)
	for i := range b {
		b[i] = byte(uint32(i) * 2654435761 >> 13)
	}
	return &pattern{block: b}
}

func (p *pattern) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k := copy(b[n:], p.block[p.off:])
		n += k
		p.off = (p.off + k) % len(p.block)
	}
	return n, nil
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

func TestRoundTrip50MB(t *testing.T) {
	if testing.Short() {
		t.Skip("50 MB round trip")
	}
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		const size = 50 << 20
		b := setup(t, db, 64<<20)
		sent := sha256.New()
		r := post(t, b.srv.URL, io.TeeReader(io.LimitReader(newPattern(), size), sent), size, "application/x-test")
		if r.Status != http.StatusCreated {
			t.Fatalf("upload: %d %s", r.Status, r.Body)
		}
		var a uploaded
		r.JSON(t, &a)
		if a.Bytes != size {
			t.Fatalf("bytes %d", a.Bytes)
		}
		resp, err := http.Get(b.srv.URL + "/artifacts/" + a.Ref)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got := sha256.New()
		n, err := io.Copy(got, resp.Body)
		if err != nil || n != size || resp.ContentLength != size {
			t.Fatalf("download: n=%d len=%d err=%v", n, resp.ContentLength, err)
		}
		want := hex.EncodeToString(sent.Sum(nil))
		if hex.EncodeToString(got.Sum(nil)) != want || resp.Header.Get("ETag") != `"`+want+`"` {
			t.Fatalf("sha256 mismatch: sent %s, got %x, etag %s", want, got.Sum(nil), resp.Header.Get("ETag"))
		}
	})
}

// TestUploadMemoryIsFlat checks that a 64 MiB upload and download allocate a small,
// size-independent amount: the body is streamed, never buffered whole.
func TestUploadMemoryIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB transfer")
	}
	db := dbtest.Open(t, database.SQLite)
	b := setup(t, db, 128<<20)
	small := allocsForRoundTrip(t, b, 1<<20)
	large := allocsForRoundTrip(t, b, 64<<20)
	t.Logf("allocated: 1 MiB → %d KiB, 64 MiB → %d KiB", small>>10, large>>10)
	// 64× the data must not cost anywhere near 64× the memory; 8 MiB is far below the
	// 64 MiB a buffered body would need.
	if large > 8<<20 {
		t.Fatalf("64 MiB round trip allocated %d bytes", large)
	}
}

func allocsForRoundTrip(t testing.TB, b *bundle, size int64) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	roundTrip(t, b, size)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func roundTrip(t testing.TB, b *bundle, size int64) {
	r := post(t, b.srv.URL, io.LimitReader(newPattern(), size), size, "application/octet-stream")
	if r.Status != http.StatusCreated {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	var a uploaded
	r.JSON(t, &a)
	resp, err := http.Get(b.srv.URL + "/artifacts/" + a.Ref)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n != size {
		t.Fatalf("downloaded %d of %d bytes", n, size)
	}
}

// BenchmarkRoundTrip uploads then downloads one artifact per iteration through the real
// HTTP stack (SQLite metadata). B/op staying flat from 1 MiB to 64 MiB shows streaming;
// peak-heap-B is the largest HeapInuse seen, sampled between iterations.
func BenchmarkRoundTrip(b *testing.B) {
	for _, size := range []int64{1 << 20, 16 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			db := dbtest.Open(b, database.SQLite)
			bd := setup(b, db, 128<<20)
			b.SetBytes(size)
			b.ReportAllocs()
			var peak uint64
			var ms runtime.MemStats
			for b.Loop() {
				roundTrip(b, bd, size)
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
			b.ReportMetric(float64(peak), "peak-heap-B")
		})
	}
}

func FuzzParseContentType(f *testing.F) {
	for _, s := range []string{"", "image/png", "text/plain; charset=utf-8", "a/b; c=\"d e\"", "garbage", "x/y;;", "multipart/form-data; boundary=--x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ct, err := artifacts.ParseContentType(s)
		if err != nil {
			return
		}
		// What we store must parse again to itself: a served header is always well formed.
		again, err := artifacts.ParseContentType(ct)
		if err != nil || again != ct {
			t.Fatalf("%q → %q → %q, %v", s, ct, again, err)
		}
	})
}

func FuzzValidRef(f *testing.F) {
	for _, s := range []string{"art_0123456789abcdef0123456789abcdef", "art_../x", "..", "art_", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !artifacts.ValidRef(s) {
			return
		}
		if strings.ContainsAny(s, `/\.`+"\x00") || filepath.Base(s) != s || !strings.HasPrefix(s, "art_") {
			t.Fatalf("accepted unsafe ref %q", s)
		}
	})
}

package catalog_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/configs"
	"github.com/svc-dev/svc/modules/catalog"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

const gib = int64(1) << 30

// stubHub stands in for the Hugging Face API: GET /api/models (full=true), GET
// /api/models/{repo}?blobs=true and GET /{repo}/resolve/main/{file} (a redirect to a
// CDN path that serves the bytes), in the wire format of the real hub.
type stubHub struct {
	*httptest.Server
	mu       sync.Mutex
	files    map[string][]byte // "owner/name/file" → content
	sha      map[string]string // announced sha256 overrides
	queries  []url.Values
	gate     chan struct{} // when set, a download sends its first chunk and waits on it
	sentHead chan struct{}
}

func newStubHub(t *testing.T) *stubHub {
	h := &stubHub{files: map[string][]byte{}, sha: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/models", h.search)
	mux.HandleFunc("GET /api/models/{owner}/{name}", h.info)
	// Files redirect to a separate CDN host, as the real hub's do.
	cdnMux := http.NewServeMux()
	cdnMux.HandleFunc("GET /{path...}", h.serve)
	cdn := httptest.NewServer(cdnMux)
	t.Cleanup(cdn.Close)
	mux.HandleFunc("GET /{owner}/{name}/resolve/main/{file...}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, cdn.URL+"/"+r.PathValue("owner")+"/"+r.PathValue("name")+"/"+r.PathValue("file"), http.StatusFound)
	})
	h.Server = httptest.NewServer(mux)
	t.Cleanup(h.Close)
	return h
}

// blob makes deterministic content of n bytes.
func blob(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}

func (h *stubHub) add(repo, file string, content []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[repo+"/"+file] = content
}

// catalogRepos are the repositories of the stub, with their hub metadata.
var stubRepos = []map[string]any{
	{"id": "acme/Tiny-1B-GGUF", "downloads": 900, "likes": 5, "tags": []string{"gguf", "text-generation"}, "pipeline_tag": "text-generation", "lastModified": "2024-09-01T10:00:00.000Z"},
	{"id": "acme/whisper-ggml", "downloads": 500, "likes": 9, "tags": []string{"whisper", "automatic-speech-recognition"}, "pipeline_tag": "automatic-speech-recognition", "lastModified": "2024-08-01T10:00:00.000Z"},
	{"id": "acme/plain-transformers-7B", "downloads": 800, "likes": 50, "tags": []string{"transformers", "safetensors"}, "pipeline_tag": "text-generation", "lastModified": "2024-07-01T10:00:00.000Z"},
	{"id": "acme/Big-70B-GGUF", "downloads": 100, "likes": 1, "tags": []string{"gguf"}, "pipeline_tag": "text-generation", "lastModified": "2024-06-01T10:00:00.000Z"},
}

func (h *stubHub) siblings(repo string, blobs bool) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []map[string]any{{"rfilename": ".gitattributes"}, {"rfilename": "README.md"}}
	for k, v := range h.files {
		if !strings.HasPrefix(k, repo+"/") {
			continue
		}
		name := strings.TrimPrefix(k, repo+"/")
		s := map[string]any{"rfilename": name}
		if blobs {
			sum := sha256.Sum256(v)
			sha := hex.EncodeToString(sum[:])
			if o, ok := h.sha[k]; ok {
				sha = o
			}
			s["blobId"] = "0123abcd"
			s["size"] = len(v)
			s["lfs"] = map[string]any{"sha256": sha, "size": len(v), "pointerSize": 135}
		}
		out = append(out, s)
	}
	return out
}

func (h *stubHub) search(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.queries = append(h.queries, r.URL.Query())
	h.mu.Unlock()
	var out []map[string]any
	for _, m := range stubRepos {
		id := m["id"].(string)
		if s := r.URL.Query().Get("search"); s != "" && !strings.Contains(strings.ToLower(id), strings.ToLower(s)) {
			continue
		}
		if r.URL.Query().Get("filter") == "gguf" && !strings.Contains(fmt.Sprint(m["tags"]), "gguf") {
			continue
		}
		c := map[string]any{"_id": "66f0", "modelId": id, "private": false, "library_name": "gguf", "createdAt": "2024-01-01T00:00:00.000Z"}
		for k, v := range m {
			c[k] = v
		}
		c["siblings"] = h.siblings(id, false)
		out = append(out, c)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (h *stubHub) info(w http.ResponseWriter, r *http.Request) {
	repo := r.PathValue("owner") + "/" + r.PathValue("name")
	for _, m := range stubRepos {
		if m["id"] != repo {
			continue
		}
		c := map[string]any{"_id": "66f0", "modelId": repo, "author": "acme", "sha": "abc", "private": false, "gated": false, "disabled": false}
		for k, v := range m {
			c[k] = v
		}
		c["siblings"] = h.siblings(repo, r.URL.Query().Get("blobs") == "true")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
		return
	}
	// The real hub answers 401 for a repository it does not show.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"error":"Invalid username or password."}`))
}

func (h *stubHub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	content, ok := h.files[r.PathValue("path")]
	gate, sent := h.gate, h.sentHead
	h.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(content)))
	if gate == nil {
		_, _ = w.Write(content)
		return
	}
	_, _ = w.Write(content[:64<<10])
	w.(http.Flusher).Flush()
	select {
	case sent <- struct{}{}:
	default:
	}
	select {
	case <-gate:
		_, _ = w.Write(content[64<<10:])
	case <-r.Context().Done():
	}
}

// hold makes downloads stream their first chunk and wait until release.
func (h *stubHub) hold() (release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gate = make(chan struct{})
	h.sentHead = make(chan struct{}, 8)
	g := h.gate
	var once sync.Once
	return func() { once.Do(func() { close(g) }) }
}

// fakeRegistry records registrations.
type fakeRegistry struct {
	mu  sync.Mutex
	ids map[string][3]string // id → engine, path, modality
}

func (f *fakeRegistry) Exists(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.ids[id]
	return ok, nil
}

func (f *fakeRegistry) RegisterLocal(_ context.Context, id, engine, path, modality string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.ids[id]; ok {
		return errors.New("exists")
	}
	f.ids[id] = [3]string{engine, path, modality}
	return nil
}

func (f *fakeRegistry) get(id string) ([3]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.ids[id]
	return v, ok
}

type setup struct {
	hub  *stubHub
	reg  *fakeRegistry
	svc  *catalog.Service
	srv  *testkit.Server
	data string
	db   *database.DB
	// stall is the StallTimeout of the next start (0 = the default).
	stall time.Duration
	// free is the free disk space the next start sees (0 = the real one).
	free int64
}

func newSetup(t *testing.T, db *database.DB, ram int64) *setup {
	t.Helper()
	h := newStubHub(t)
	// The tiny model: three quantizations, one split in two parts.
	h.add("acme/Tiny-1B-GGUF", "tiny-1b.Q4_K_M.gguf", blob(3<<20, 1))
	h.add("acme/Tiny-1B-GGUF", "tiny-1b.Q8_0.gguf", blob(5<<20, 2))
	h.add("acme/Tiny-1B-GGUF", "F16/tiny-1b-F16-00001-of-00002.gguf", blob(2<<20, 3))
	h.add("acme/Tiny-1B-GGUF", "F16/tiny-1b-F16-00002-of-00002.gguf", blob(2<<20, 4))
	h.add("acme/Tiny-1B-GGUF", "mmproj-tiny-f16.gguf", blob(1024, 5))
	h.add("acme/whisper-ggml", "ggml-tiny.en.bin", blob(1<<20, 6))
	h.add("acme/whisper-ggml", "ggml-tiny.en-q5_1.bin", blob(512<<10, 7))
	s := &setup{hub: h, reg: &fakeRegistry{ids: map[string][3]string{}}, data: t.TempDir(), db: db}
	s.start(t, ram)
	return s
}

func (s *setup) start(t *testing.T, ram int64) {
	t.Helper()
	opts := catalog.Options{
		DB: s.db, Registry: s.reg, DataDir: s.data, HubURL: s.hub.URL, Curated: configs.Catalog,
		RAM: func() (int64, error) { return ram, nil }, Logger: zerolog.Nop(), StallTimeout: s.stall,
	}
	if s.free > 0 {
		opts.FreeSpace = func(string) (int64, error) { return s.free, nil }
	}
	svc, err := catalog.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	s.svc = svc
	s.srv = testkit.New(t, testkit.Options{}, catalog.NewModule(svc))
}

func (s *setup) job(t *testing.T, id string) catalog.Job {
	t.Helper()
	r := s.srv.Do(http.MethodGet, "/admin/catalog/downloads/"+id, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("job: %d %s", r.Status, r.Body)
	}
	var j catalog.Job
	r.JSON(t, &j)
	return j
}

// waitJob polls until the job satisfies ok (a generous bound only guards against a hang).
func (s *setup) waitJob(t *testing.T, id string, ok func(catalog.Job) bool) catalog.Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j := s.job(t, id)
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job never reached the expected state: %+v", j)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ended(j catalog.Job) bool {
	return j.State == catalog.StateCompleted || j.State == catalog.StateFailed || j.State == catalog.StateCanceled
}

func (s *setup) install(t *testing.T, repo, variant, id string) catalog.Job {
	t.Helper()
	r := s.srv.Do(http.MethodPost, "/admin/catalog/install", map[string]any{"repo": repo, "variantId": variant, "logicalId": id})
	if r.Status != http.StatusAccepted {
		t.Fatalf("install: %d %s", r.Status, r.Body)
	}
	var j catalog.Job
	r.JSON(t, &j)
	if j.JobID == "" || j.State != catalog.StateQueued {
		t.Fatalf("install answer: %s", r.Body)
	}
	return j
}

func TestFit(t *testing.T) {
	const ram = 16 * gib
	cases := []struct {
		size int64
		ram  int64
		want string
	}{
		{0, ram, catalog.FitUnknown},
		{4 * gib, 0, catalog.FitUnknown},
		{1 * gib, ram, catalog.FitFits},
		// 8 GiB × 1.1 + 0.5 GiB = 9.3 GiB ≤ 9.6 GiB (60%)
		{8 * gib, ram, catalog.FitFits},
		// 9 GiB → 10.4 GiB: above 60%, below 75% (12 GiB)
		{9 * gib, ram, catalog.FitTight},
		// 10.5 GiB → 12.05 GiB > 12 GiB
		{10*gib + gib/2, ram, catalog.FitTooLarge},
		{40 * gib, ram, catalog.FitTooLarge},
	}
	for _, c := range cases {
		est, got := catalog.Fit(c.size, c.ram)
		if got != c.want {
			t.Errorf("Fit(%d, %d) = %s (estimate %d), want %s", c.size, c.ram, got, est, c.want)
		}
		if c.size > 0 && est != c.size+c.size/10+512<<20 {
			t.Errorf("estimate of %d = %d", c.size, est)
		}
	}
}

func TestQuantization(t *testing.T) {
	cases := map[string]string{
		"llama-2-7b.Q4_K_M.gguf":                  "Q4_K_M",
		"qwen2.5-0.5b-instruct-q4_k_m.gguf":       "Q4_K_M",
		"Meta-Llama-3.1-8B-Instruct-IQ2_XXS.gguf": "IQ2_XXS",
		"model-Q8_0-00001-of-00003.gguf":          "Q8_0",
		"phi-3-mini-f16.gguf":                     "F16",
		"Q4_K_M/model-Q4_K_M-00002-of-00002.gguf": "Q4_K_M",
		"ggml-tiny.en-q5_1.bin":                   "Q5_1",
		"model.gguf":                              "",
		"SmolLM2-135M-Instruct-bf16.gguf":         "BF16",
		"Llama-3.2-3B-Instruct-Q4_0_4_4.gguf":     "Q4_0_4_4",
	}
	for in, want := range cases {
		if got := catalog.Quantization(in); got != want {
			t.Errorf("Quantization(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVariants(t *testing.T) {
	files := []catalog.File{
		{Name: "README.md", Size: 10},
		{Name: "m.Q4_K_M.gguf", Size: 4 * gib},
		{Name: "m.Q8_0.gguf", Size: 8 * gib},
		{Name: "m-Q6_K-00001-of-00002.gguf", Size: 3 * gib},
		{Name: "m-Q6_K-00002-of-00002.gguf", Size: 3 * gib},
		{Name: "m-F16-00001-of-00003.gguf", Size: 10 * gib}, // part 2 and 3 missing: dropped
		{Name: "../escape.Q2_K.gguf", Size: 1},
		{Name: "/abs.Q3_K.gguf", Size: 1},
		{Name: "mmproj-m-f16.gguf", Size: 1 << 20},
	}
	vs := catalog.Variants(files, 16*gib)
	var got []string
	for _, v := range vs {
		got = append(got, fmt.Sprintf("%s:%d:%s:%t", v.ID, len(v.Files), v.Fit, v.Recommended))
	}
	// At 16 GiB everything fits (Q8_0: 8 GiB → 9.3 GiB ≤ 9.6 GiB): the largest is recommended.
	want := []string{"Q4_K_M:1:fits:false", "Q6_K:2:fits:false", "Q8_0:1:fits:true"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("variants = %v, want %v", got, want)
	}
	// With 11 GiB (60% = 6.6 GiB, 75% = 8.25 GiB), Q8_0 (9.3 GiB) is too large, Q6_K
	// (7.1 GiB) is tight: Q4_K_M (4.9 GiB) is recommended.
	vs = catalog.Variants(files, 11*gib)
	got = nil
	for _, v := range vs {
		got = append(got, fmt.Sprintf("%s:%s:%t", v.ID, v.Fit, v.Recommended))
	}
	if w := "Q4_K_M:fits:true Q6_K:tight:false Q8_0:too_large:false"; strings.Join(got, " ") != w {
		t.Fatalf("variants at 11 GiB = %v, want %s", got, w)
	}
	// Two files sharing a quantization keep distinct ids (their stems).
	vs = catalog.Variants([]catalog.File{{Name: "a-Q4_0.gguf", Size: 1}, {Name: "b-Q4_0.gguf", Size: 1}}, 16*gib)
	if len(vs) != 2 || vs[0].ID == vs[1].ID {
		t.Fatalf("shared quantization: %+v", vs)
	}
}

func FuzzVariants(f *testing.F) {
	f.Add("m.Q4_K_M.gguf", "m-Q6_K-00001-of-00002.gguf", "../x.gguf")
	f.Add("ggml-tiny.bin", "a/b/c-00003-of-00002.gguf", "mmproj.gguf")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		vs := catalog.Variants([]catalog.File{{Name: a, Size: 10}, {Name: b, Size: 20}, {Name: c}}, 16*gib)
		seen := map[string]bool{}
		for _, v := range vs {
			if seen[v.ID] {
				t.Fatalf("duplicate variant id %q", v.ID)
			}
			seen[v.ID] = true
			for _, fl := range v.Files {
				if !catalog.SafeFileName(fl.Name) {
					t.Fatalf("unsafe file %q in a variant", fl.Name)
				}
			}
		}
	})
}

func FuzzSafeFileName(f *testing.F) {
	for _, s := range []string{"a.gguf", "../a.gguf", "a/../../b", "/etc/passwd", "a//b", "a\\..\\b", "Q4/x.gguf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !catalog.SafeFileName(name) {
			return
		}
		base := t.TempDir()
		p := filepath.Join(base, filepath.FromSlash(name))
		rel, err := filepath.Rel(base, p)
		if err != nil || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) || rel == "." {
			t.Fatalf("SafeFileName(%q) but it resolves to %q", name, rel)
		}
	})
}

func TestParameters(t *testing.T) {
	cases := map[string]int64{
		"Qwen/Qwen2.5-0.5B-Instruct-GGUF":           500_000_000,
		"bartowski/Meta-Llama-3.1-8B-Instruct-GGUF": 8_000_000_000,
		"HuggingFaceTB/SmolLM2-135M-Instruct-GGUF":  135_000_000,
		"TheBloke/Mixtral-8x7B-v0.1-GGUF":           56_000_000_000,
		"ggerganov/whisper.cpp":                     0,
	}
	for in, want := range cases {
		if got := catalog.Parameters(in); got != want {
			t.Errorf("Parameters(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestSearch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, 16*gib)
		r := s.srv.Do(http.MethodGet, "/admin/catalog/models?search=acme&sort=likes&limit=5", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("search: %d %s", r.Status, r.Body)
		}
		var res catalog.SearchResult
		r.JSON(t, &res)
		if res.Source != "hub" {
			t.Fatalf("source %q", res.Source)
		}
		var ids []string
		for _, m := range res.Models {
			ids = append(ids, m.ID+"="+m.Engine)
		}
		// The gguf filter drops the whisper and transformers repositories.
		if w := "acme/Tiny-1B-GGUF=llama.cpp acme/Big-70B-GGUF=llama.cpp"; strings.Join(ids, " ") != w {
			t.Fatalf("models %v, want %s", ids, w)
		}
		if res.Models[0].Size != "small" || res.Models[1].Size != "large" || res.Models[0].LastModified == nil {
			t.Fatalf("summary: %+v", res.Models)
		}
		s.hub.mu.Lock()
		q := s.hub.queries[len(s.hub.queries)-1]
		s.hub.mu.Unlock()
		if q.Get("search") != "acme" || q.Get("sort") != "likes" || q.Get("filter") != "gguf" || q.Get("full") != "true" || q.Get("direction") != "-1" || q.Get("limit") != "15" {
			t.Fatalf("hub query %v", q)
		}
		// Speech: no gguf filter, whisper ggml repositories are found.
		r = s.srv.Do(http.MethodGet, "/admin/catalog/models?modality=transcription", nil)
		r.JSON(t, &res)
		if len(res.Models) != 1 || res.Models[0].ID != "acme/whisper-ggml" || res.Models[0].Engine != "whisper.cpp" {
			t.Fatalf("transcription: %s", r.Body)
		}
		r = s.srv.Do(http.MethodGet, "/admin/catalog/models?size=large&engines=llama.cpp,stable-diffusion.cpp", nil)
		r.JSON(t, &res)
		if len(res.Models) != 1 || res.Models[0].ID != "acme/Big-70B-GGUF" {
			t.Fatalf("size=large: %s", r.Body)
		}
		// A repeated search is answered from the cache.
		s.hub.mu.Lock()
		n := len(s.hub.queries)
		s.hub.mu.Unlock()
		s.srv.Do(http.MethodGet, "/admin/catalog/models?modality=transcription", nil)
		s.hub.mu.Lock()
		if len(s.hub.queries) != n {
			t.Errorf("a repeated search went to the hub again")
		}
		s.hub.mu.Unlock()

		for _, bad := range []string{
			"sort=stars", "sort=", "limit=0", "limit=101", "limit=ten", "limit=1.5", "engines=ollama", "engines=llama.cpp,", "size=huge",
			"modality=video", "search=" + strings.Repeat("a", 201), "search=a%00b", "q=x", "limit=1&limit=2",
		} {
			if bad == "sort=" {
				continue // an empty value means the default
			}
			r := s.srv.Do(http.MethodGet, "/admin/catalog/models?"+bad, nil)
			if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_request" {
				t.Errorf("%s: %d %s", bad, r.Status, r.Body)
			}
		}
	})
}

func TestSearchFallsBackToCurated(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, 16*gib)
		s.hub.Close() // the hub is unreachable from now on
		r := s.srv.Do(http.MethodGet, "/admin/catalog/models?search=qwen&modality=chat", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("search: %d %s", r.Status, r.Body)
		}
		var res catalog.SearchResult
		r.JSON(t, &res)
		if res.Source != "curated" || res.HubError == "" || len(res.Models) != 3 {
			t.Fatalf("curated: %s", r.Body)
		}
		for _, m := range res.Models {
			if !strings.HasPrefix(m.ID, "Qwen/") || m.Engine != "llama.cpp" {
				t.Fatalf("curated model %+v", m)
			}
		}
		r = s.srv.Do(http.MethodGet, "/admin/catalog/models/ggerganov/whisper.cpp", nil)
		var d catalog.Detail
		r.JSON(t, &d)
		if r.Status != http.StatusOK || d.Source != "curated" || d.Engine != "whisper.cpp" || len(d.Variants) != 0 {
			t.Fatalf("curated detail: %d %s", r.Status, r.Body)
		}
		r = s.srv.Do(http.MethodGet, "/admin/catalog/models/nobody/nothing", nil)
		if r.Status != http.StatusBadGateway || r.ErrorCode() != "hub_unavailable" {
			t.Fatalf("unknown repo with the hub down: %d %s", r.Status, r.Body)
		}
		r = s.srv.Do(http.MethodPost, "/admin/catalog/install", map[string]any{"repo": "ggerganov/whisper.cpp", "variantId": "tiny", "logicalId": "w"})
		if r.Status != http.StatusBadGateway || r.ErrorCode() != "hub_unavailable" {
			t.Fatalf("install with the hub down: %d %s", r.Status, r.Body)
		}
	})
}

func TestModelDetail(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, 16*gib)
		for _, p := range []string{"/admin/catalog/models/acme/Tiny-1B-GGUF", "/admin/catalog/models/acme%2FTiny-1B-GGUF"} {
			r := s.srv.Do(http.MethodGet, p, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", p, r.Status, r.Body)
			}
			var d catalog.Detail
			r.JSON(t, &d)
			var got []string
			for _, v := range d.Variants {
				got = append(got, fmt.Sprintf("%s:%d:%d", v.ID, len(v.Files), v.SizeBytes))
				if v.Fit != catalog.FitFits || v.EstimatedBytes != catalog.EstimateMemory(v.SizeBytes) {
					t.Errorf("variant %+v", v)
				}
				for _, f := range v.Files {
					if len(f.SHA256) != 64 {
						t.Errorf("file without sha256: %+v", f)
					}
				}
			}
			if w := fmt.Sprintf("Q4_K_M:1:%d F16:2:%d Q8_0:1:%d", 3<<20, 4<<20, 5<<20); strings.Join(got, " ") != w {
				t.Fatalf("variants %v, want %s", got, w)
			}
			if d.Recommended != "Q8_0" || d.Engine != "llama.cpp" || d.Modality != "chat" || d.RAMBytes != 16*gib || d.Source != "hub" {
				t.Fatalf("detail: %s", r.Body)
			}
		}
		r := s.srv.Do(http.MethodGet, "/admin/catalog/models/acme/whisper-ggml", nil)
		var d catalog.Detail
		r.JSON(t, &d)
		if d.Engine != "whisper.cpp" || d.Modality != "transcription" || len(d.Variants) != 2 || d.Variants[0].ID != "tiny.en-q5_1" {
			t.Fatalf("whisper detail: %s", r.Body)
		}
		for p, want := range map[string]string{
			"/admin/catalog/models/acme/nothing":               "repo_not_found",
			"/admin/catalog/models/acme/plain-transformers-7B": "repo_not_found",
			"/admin/catalog/models/..%2F..%2Fetc":              "invalid_repo",
			"/admin/catalog/models/acme%2F..":                  "invalid_repo",
			"/admin/catalog/models/acme/a..b":                  "invalid_repo",
			"/admin/catalog/models/-x/y":                       "invalid_repo",
			"/admin/catalog/models/noslash":                    "invalid_repo",
		} {
			r := s.srv.Do(http.MethodGet, p, nil)
			if r.ErrorCode() != want {
				t.Errorf("%s: %d %s, want %s", p, r.Status, r.Body, want)
			}
		}
	})
}

// The badges follow the injected RAM: every variant here estimates at 515-518 MiB (the
// 512 MiB context allowance dominates).
func TestModelDetailSmallRAM(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	for _, c := range []struct {
		ram         int64
		fit         string
		recommended string
	}{
		{1 * gib, catalog.FitFits, "Q8_0"},   // 60% = 614 MiB
		{700 << 20, catalog.FitTight, ""},    // 60% = 420 MiB, 75% = 525 MiB
		{600 << 20, catalog.FitTooLarge, ""}, // 75% = 450 MiB
	} {
		s := newSetup(t, db, c.ram)
		r := s.srv.Do(http.MethodGet, "/admin/catalog/models/acme/Tiny-1B-GGUF", nil)
		var d catalog.Detail
		r.JSON(t, &d)
		if d.Recommended != c.recommended || len(d.Variants) != 3 {
			t.Fatalf("RAM %d: %s", c.ram, r.Body)
		}
		for _, v := range d.Variants {
			if v.Fit != c.fit || v.Recommended != (v.ID == c.recommended) {
				t.Fatalf("RAM %d: variant %+v, want %s", c.ram, v, c.fit)
			}
		}
	}
}

func TestInstall(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, 16*gib)
		j := s.install(t, "acme/Tiny-1B-GGUF", "F16", "tiny")
		done := s.waitJob(t, j.JobID, ended)
		if done.State != catalog.StateCompleted || done.BytesDone != 4<<20 || done.BytesTotal != 4<<20 || done.FinishedAt == nil {
			t.Fatalf("job: %+v", done)
		}
		want := filepath.Join(s.data, "models", "acme", "Tiny-1B-GGUF", "F16", "tiny-1b-F16-00001-of-00002.gguf")
		if done.ModelPath != want {
			t.Fatalf("modelPath %q, want %q", done.ModelPath, want)
		}
		for i, seed := range []byte{3, 4} {
			p := filepath.Join(filepath.Dir(want), fmt.Sprintf("tiny-1b-F16-0000%d-of-00002.gguf", i+1))
			b, err := os.ReadFile(p)
			if err != nil || string(b) != string(blob(2<<20, seed)) {
				t.Fatalf("part %d: %v", i+1, err)
			}
			if _, err := os.Stat(p + ".part"); !os.IsNotExist(err) {
				t.Fatalf("partial file left: %v", err)
			}
		}
		reg, ok := s.reg.get("tiny")
		if !ok || reg != [3]string{"llama.cpp", want, "chat"} {
			t.Fatalf("registration %v %v", reg, ok)
		}
		// The id is now taken.
		r := s.srv.Do(http.MethodPost, "/admin/catalog/install", map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "Q4_K_M", "logicalId": "tiny"})
		if r.Status != http.StatusConflict || r.ErrorCode() != "logical_id_exists" {
			t.Fatalf("second install: %d %s", r.Status, r.Body)
		}
		r = s.srv.Do(http.MethodGet, "/admin/catalog/downloads", nil)
		var list struct {
			Downloads []catalog.Job `json:"downloads"`
		}
		r.JSON(t, &list)
		if len(list.Downloads) != 1 || list.Downloads[0].JobID != j.JobID {
			t.Fatalf("downloads: %s", r.Body)
		}
		// Cancel of a finished job.
		r = s.srv.Do(http.MethodPost, "/admin/catalog/downloads/"+j.JobID+":cancel", nil)
		if r.Status != http.StatusConflict || r.ErrorCode() != "download_finished" {
			t.Fatalf("cancel finished: %d %s", r.Status, r.Body)
		}
		// Whisper: a ggml .bin variant registers with whisper.cpp for transcription.
		j = s.install(t, "acme/whisper-ggml", "tiny.en-q5_1", "whisper-tiny")
		if done := s.waitJob(t, j.JobID, ended); done.State != catalog.StateCompleted {
			t.Fatalf("whisper job %+v", done)
		}
		if reg, _ := s.reg.get("whisper-tiny"); reg[0] != "whisper.cpp" || reg[2] != "transcription" {
			t.Fatalf("whisper registration %v", reg)
		}
	})
}

func TestInstallRejects(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, 16*gib)
		s.reg.ids["taken"] = [3]string{}
		cases := []struct {
			body   any
			status int
			code   string
		}{
			{map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "Q4_K_M", "logicalId": "taken"}, 409, "logical_id_exists"},
			{map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "Q2_K", "logicalId": "x"}, 404, "variant_not_found"},
			{map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "", "logicalId": "x"}, 404, "variant_not_found"},
			{map[string]any{"repo": "acme/nothing", "variantId": "Q4_K_M", "logicalId": "x"}, 404, "repo_not_found"},
			{map[string]any{"repo": "../../etc", "variantId": "Q4_K_M", "logicalId": "x"}, 400, "invalid_repo"},
			{map[string]any{"repo": "acme/..", "variantId": "Q4_K_M", "logicalId": "x"}, 400, "invalid_repo"},
			{map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "Q4_K_M", "logicalId": ".bad"}, 400, "invalid_model_id"},
			{map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "Q4_K_M", "logicalId": "x", "engine": "ollama"}, 400, "unknown_engine"},
			{map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "Q4_K_M", "logicalId": "x", "extra": 1}, 400, "invalid_request"},
			{`{"repo":`, 400, "invalid_request"},
		}
		for _, c := range cases {
			r := s.srv.Do(http.MethodPost, "/admin/catalog/install", c.body)
			if r.Status != c.status || r.ErrorCode() != c.code {
				t.Errorf("%v: %d %s, want %d %s", c.body, r.Status, r.Body, c.status, c.code)
			}
		}
		var n int64
		if err := db.Raw("SELECT COUNT(*) FROM catalog_downloads").Scan(&n).Error; err != nil || n != 0 {
			t.Fatalf("rejected installs stored %d jobs (%v)", n, err)
		}
		if r := s.srv.Do(http.MethodGet, "/admin/catalog/downloads/nope", nil); r.ErrorCode() != "download_not_found" {
			t.Fatalf("unknown job: %s", r.Body)
		}
		if r := s.srv.Do(http.MethodPost, "/admin/catalog/downloads/nope:cancel", nil); r.ErrorCode() != "download_not_found" {
			t.Fatalf("cancel unknown job: %s", r.Body)
		}
		if r := s.srv.Do(http.MethodPost, "/admin/catalog/downloads/nope:pause", nil); r.Status != 404 {
			t.Fatalf("unknown action: %s", r.Body)
		}
	})
}

func TestInstallChecksumMismatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, 16*gib)
		s.hub.mu.Lock()
		s.hub.sha["acme/Tiny-1B-GGUF/tiny-1b.Q4_K_M.gguf"] = strings.Repeat("ab", 32)
		s.hub.mu.Unlock()
		j := s.install(t, "acme/Tiny-1B-GGUF", "Q4_K_M", "tiny")
		done := s.waitJob(t, j.JobID, ended)
		if done.State != catalog.StateFailed || !strings.Contains(done.Error, "sha256") {
			t.Fatalf("job %+v", done)
		}
		p := filepath.Join(s.data, "models", "acme", "Tiny-1B-GGUF", "tiny-1b.Q4_K_M.gguf")
		for _, f := range []string{p, p + ".part"} {
			if _, err := os.Stat(f); !os.IsNotExist(err) {
				t.Fatalf("%s left behind (%v)", f, err)
			}
		}
		if _, ok := s.reg.get("tiny"); ok {
			t.Fatal("a failed install registered the id")
		}
		// The id is free again once the job failed.
		s.hub.mu.Lock()
		delete(s.hub.sha, "acme/Tiny-1B-GGUF/tiny-1b.Q4_K_M.gguf")
		s.hub.mu.Unlock()
		j = s.install(t, "acme/Tiny-1B-GGUF", "Q4_K_M", "tiny")
		if done := s.waitJob(t, j.JobID, ended); done.State != catalog.StateCompleted {
			t.Fatalf("retry %+v", done)
		}
	})
}

func TestCancel(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, 16*gib)
		release := s.hub.hold()
		defer release()
		j := s.install(t, "acme/Tiny-1B-GGUF", "Q8_0", "tiny")
		<-s.hub.sentHead
		mid := s.waitJob(t, j.JobID, func(j catalog.Job) bool { return j.BytesDone > 0 })
		if mid.State != catalog.StateDownloading || mid.BytesTotal != 5<<20 {
			t.Fatalf("mid-download: %+v", mid)
		}
		// A second install of the same id while the first is live.
		r := s.srv.Do(http.MethodPost, "/admin/catalog/install", map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "Q4_K_M", "logicalId": "tiny"})
		if r.Status != http.StatusConflict || r.ErrorCode() != "logical_id_exists" {
			t.Fatalf("install during a live job: %d %s", r.Status, r.Body)
		}
		r = s.srv.Do(http.MethodPost, "/admin/catalog/downloads/"+j.JobID+":cancel", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		var c catalog.Job
		r.JSON(t, &c)
		if c.State != catalog.StateCanceled || c.FinishedAt == nil {
			t.Fatalf("canceled job %+v", c)
		}
		p := filepath.Join(s.data, "models", "acme", "Tiny-1B-GGUF", "tiny-1b.Q8_0.gguf")
		for _, f := range []string{p, p + ".part"} {
			if _, err := os.Stat(f); !os.IsNotExist(err) {
				t.Fatalf("%s left behind (%v)", f, err)
			}
		}
		if _, ok := s.reg.get("tiny"); ok {
			t.Fatal("a canceled install registered the id")
		}
		if got := s.job(t, j.JobID); got.State != catalog.StateCanceled {
			t.Fatalf("after cancel: %+v", got)
		}
	})
}

func TestRestartFailsInFlightJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, 16*gib)
		release := s.hub.hold()
		defer release()
		j := s.install(t, "acme/Tiny-1B-GGUF", "Q8_0", "tiny")
		<-s.hub.sentHead
		s.waitJob(t, j.JobID, func(j catalog.Job) bool { return j.State == catalog.StateDownloading })
		old := s.svc
		// A new process on the same database and data folder.
		s.start(t, 16*gib)
		got := s.job(t, j.JobID)
		if got.State != catalog.StateFailed || got.Error != "interrupted" {
			t.Fatalf("after restart: %+v", got)
		}
		part := filepath.Join(s.data, "models", "acme", "Tiny-1B-GGUF", "tiny-1b.Q8_0.gguf.part")
		if _, err := os.Stat(part); !os.IsNotExist(err) {
			t.Fatalf("the restart left the partial file (%v)", err)
		}
		// The old process going away does not overwrite the recorded end.
		old.Close()
		if got := s.job(t, j.JobID); got.State != catalog.StateFailed || got.Error != "interrupted" {
			t.Fatalf("after the old process closed: %+v", got)
		}
		r := s.srv.Do(http.MethodPost, "/admin/catalog/downloads/"+j.JobID+":cancel", nil)
		if r.ErrorCode() != "download_finished" {
			t.Fatalf("cancel of an interrupted job: %s", r.Body)
		}
	})
}

func TestCloseInterruptsJobs(t *testing.T) {
	s := newSetup(t, dbtest.Open(t, database.SQLite), 16*gib)
	release := s.hub.hold()
	defer release()
	j := s.install(t, "acme/Tiny-1B-GGUF", "Q8_0", "tiny")
	<-s.hub.sentHead
	s.svc.Close()
	if got := s.job(t, j.JobID); got.State != catalog.StateFailed || got.Error != "interrupted" {
		t.Fatalf("after close: %+v", got)
	}
	p := filepath.Join(s.data, "models", "acme", "Tiny-1B-GGUF", "tiny-1b.Q8_0.gguf.part")
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("partial file left (%v)", err)
	}
	r := s.srv.Do(http.MethodPost, "/admin/catalog/install", map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "Q4_K_M", "logicalId": "other"})
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "unavailable" {
		t.Fatalf("install after close: %d %s", r.Status, r.Body)
	}
}

func TestCuratedCatalogIsValid(t *testing.T) {
	_, err := catalog.New(context.Background(), catalog.Options{
		DB: dbtest.Open(t, database.SQLite), Registry: &fakeRegistry{}, DataDir: t.TempDir(), Curated: []byte(`{"models":[{"id":"../x","engine":"llama.cpp","modality":"chat"}]}`),
	})
	if err == nil {
		t.Fatal("a curated entry with a bad id was accepted")
	}
	if _, err := catalog.New(context.Background(), catalog.Options{DB: dbtest.Open(t, database.SQLite), Registry: &fakeRegistry{}, DataDir: t.TempDir(), Curated: configs.Catalog}); err != nil {
		t.Fatalf("configs/catalog.json: %v", err)
	}
}

func TestStalledDownloadFails(t *testing.T) {
	s := newSetup(t, dbtest.Open(t, database.SQLite), 16*gib)
	s.stall = 100 * time.Millisecond
	s.start(t, 16*gib)
	release := s.hub.hold()
	defer release()
	j := s.install(t, "acme/Tiny-1B-GGUF", "Q8_0", "tiny")
	done := s.waitJob(t, j.JobID, ended)
	if done.State != catalog.StateFailed || !strings.Contains(done.Error, "sent nothing") {
		t.Fatalf("stalled job: %+v", done)
	}
	p := filepath.Join(s.data, "models", "acme", "Tiny-1B-GGUF", "tiny-1b.Q8_0.gguf.part")
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("partial file left (%v)", err)
	}
}

func TestInstallNeedsDiskSpace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, 16*gib)
		s.free = 6 << 20
		s.start(t, 16*gib)
		release := s.hub.hold()
		defer release()
		r := s.srv.Do(http.MethodPost, "/admin/catalog/install", map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "Q8_0", "logicalId": "big"})
		if r.Status != http.StatusAccepted {
			t.Fatalf("5 MiB into 6 MiB: %d %s", r.Status, r.Body)
		}
		var j catalog.Job
		r.JSON(t, &j)
		<-s.hub.sentHead
		// 3 MiB more while the first job still has ~5 MiB to write.
		r = s.srv.Do(http.MethodPost, "/admin/catalog/install", map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "Q4_K_M", "logicalId": "small"})
		if r.Status != http.StatusInsufficientStorage || r.ErrorCode() != "insufficient_storage" {
			t.Fatalf("second install: %d %s", r.Status, r.Body)
		}
		if r := s.srv.Do(http.MethodPost, "/admin/catalog/downloads/"+j.JobID+":cancel", nil); r.Status != http.StatusOK {
			t.Fatalf("cancel: %s", r.Body)
		}
		r = s.srv.Do(http.MethodPost, "/admin/catalog/install", map[string]any{"repo": "acme/Tiny-1B-GGUF", "variantId": "F16", "logicalId": "small"})
		if r.Status != http.StatusAccepted {
			t.Fatalf("4 MiB into 6 MiB once the first job ended: %d %s", r.Status, r.Body)
		}
	})
}

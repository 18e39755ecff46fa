package cmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/configs"
	"github.com/svc-dev/svc/modules/catalog"
	"github.com/svc-dev/svc/modules/credentials"
	"github.com/svc-dev/svc/modules/engines"
	"github.com/svc-dev/svc/modules/models"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

// TestCatalogCLI installs a model from a stand-in hub through the CLI and finds it in the
// real model registry with a llama.cpp binding.
func TestCatalogCLI(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		content := []byte(strings.Repeat("GGUF model bytes ", 60000))
		sum := sha256.Sum256(content)
		const repo = "acme/Tiny-1B-GGUF"
		hub := http.NewServeMux()
		hub.HandleFunc("GET /api/models", func(w http.ResponseWriter, r *http.Request) {
			_, _ = fmt.Fprintf(w, `[{"_id":"1","id":%q,"modelId":%q,"downloads":7,"likes":2,"tags":["gguf"],"pipeline_tag":"text-generation","lastModified":"2024-09-01T10:00:00.000Z","siblings":[{"rfilename":"tiny.Q4_K_M.gguf"}]}]`, repo, repo)
		})
		hub.HandleFunc("GET /api/models/acme/Tiny-1B-GGUF", func(w http.ResponseWriter, r *http.Request) {
			_, _ = fmt.Fprintf(w, `{"_id":"1","id":%q,"downloads":7,"likes":2,"tags":["gguf"],"pipeline_tag":"text-generation","siblings":[{"rfilename":"README.md","size":10},{"rfilename":"tiny.Q4_K_M.gguf","blobId":"b","size":%d,"lfs":{"sha256":%q,"size":%d,"pointerSize":135}}]}`, repo, len(content), hex.EncodeToString(sum[:]), len(content))
		})
		hub.HandleFunc("GET /acme/Tiny-1B-GGUF/resolve/main/tiny.Q4_K_M.gguf", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(content)
		})
		hubSrv := httptest.NewServer(hub)
		defer hubSrv.Close()

		creds := credentials.New(db, secrets.Ephemeral(), func(string) string { return "" })
		eng := engines.New(engines.Options{MaxResident: 2})
		reg := models.New(db, eng, creds, models.Options{})
		dataDir := t.TempDir()
		cat, err := catalog.New(context.Background(), catalog.Options{
			DB: db, Registry: catalogRegistry{reg}, DataDir: dataDir, HubURL: hubSrv.URL, Curated: configs.Catalog,
			RAM: func() (int64, error) { return 8 << 30, nil }, Logger: zerolog.Nop(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := cat.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer cat.Close()
		srv := testkit.New(t, testkit.Options{}, models.NewModule(reg), catalog.NewModule(cat))
		url := "--inference-url=" + srv.URL

		out, err := runCLI(t, "", "catalog", "search", "tiny", url, "--sort", "likes")
		if err != nil || !strings.Contains(out, repo) || !strings.Contains(out, "llama.cpp") {
			t.Fatalf("search: %v\n%s", err, out)
		}
		if _, err := runCLI(t, "", "catalog", "search", url, "--sort", "stars"); err == nil || !strings.Contains(err.Error(), "invalid_request") {
			t.Fatalf("bad sort: %v", err)
		}
		out, err = runCLI(t, "", "catalog", "show", repo, url)
		if err != nil || !strings.Contains(out, "Q4_K_M") || !strings.Contains(out, "recommended") || !strings.Contains(out, "fits") {
			t.Fatalf("show: %v\n%s", err, out)
		}
		out, err = runCLI(t, "", "catalog", "install", repo, "tiny", url, "--wait")
		if err != nil || !strings.Contains(out, `"state": "completed"`) {
			t.Fatalf("install: %v\n%s", err, out)
		}
		var job catalog.Job
		if err := json.Unmarshal([]byte(out), &job); err != nil {
			t.Fatal(err)
		}
		m, err := reg.Resolve(context.Background(), "tiny")
		if err != nil || m.Binding != models.BindingLlamaCpp || m.ModelPath != filepath.Join(dataDir, "models", "acme", "Tiny-1B-GGUF", "tiny.Q4_K_M.gguf") {
			t.Fatalf("registered: %+v %v", m, err)
		}
		if _, err := runCLI(t, "", "catalog", "install", repo, "tiny", url, "--variant", "Q4_K_M"); err == nil || !strings.Contains(err.Error(), "logical_id_exists") {
			t.Fatalf("second install: %v", err)
		}
		out, err = runCLI(t, "", "catalog", "downloads", url)
		if err != nil || !strings.Contains(out, job.JobID) || !strings.Contains(out, "completed") {
			t.Fatalf("downloads: %v\n%s", err, out)
		}
		if _, err := runCLI(t, "", "catalog", "cancel", job.JobID, url); err == nil || !strings.Contains(err.Error(), "download_finished") {
			t.Fatalf("cancel: %v", err)
		}
	})
}

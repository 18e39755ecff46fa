package cmd

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/engines"
	"github.com/svc-dev/svc/modules/engines/enginetest"
	"github.com/svc-dev/svc/platform/config"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/events"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

// The cmd test binary doubles as a stand-in llama-server (see enginetest): llama.cpp does
// not install from Debian's packages here.
func TestMain(m *testing.M) { enginetest.Main(m) }

// TestLocalEnginesOverRegistry registers local models through the admin API and serves
// them through /v1 on the real inference plane: llama.cpp with the stand-in server on PATH,
// espeak-ng with the real program.
func TestLocalEnginesOverRegistry(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(bin, "llama-server")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(model, []byte("GGUF"), 0o600); err != nil {
		t.Fatal(err)
	}
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		cfg := config.Defaults()
		cfg.DataDir = t.TempDir()
		cfg.MaxResident = 1
		bus := events.NewBus(events.Options{})
		t.Cleanup(bus.Close)
		d := &deps{cfg: cfg, log: zerolog.Nop(), db: db, keys: secrets.Ephemeral(), bus: bus}
		p, err := buildInference(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		closeEngines := func() {
			for i := len(d.closer) - 1; i >= 0; i-- {
				_ = d.closer[i]()
			}
			d.closer = nil
		}
		t.Cleanup(closeEngines)
		srv := httptest.NewServer(p.echo)
		t.Cleanup(srv.Close)
		do := func(method, path string, body any) *testkit.Response {
			return testkit.Do(t, srv.URL, method, path, body)
		}
		listing := func() engines.Listing {
			var l engines.Listing
			do(http.MethodGet, "/admin/engines", nil).JSON(t, &l)
			return l
		}
		if r := do(http.MethodPut, "/admin/models/local%2Fqwen", map[string]any{"binding": "llama.cpp", "modelPath": model, "ctxSize": 256}); r.Status != http.StatusCreated {
			t.Fatalf("register llama = %d %s", r.Status, r.Body)
		}
		if st := do(http.MethodGet, "/admin/models/local%2Fqwen", nil).Map(t)["state"]; st != "stopped" {
			t.Fatalf("state before use = %v", st)
		}
		r := do(http.MethodPost, "/v1/chat/completions", map[string]any{"model": "local/qwen", "messages": []any{map[string]any{"role": "user", "content": "hello"}}})
		if r.Status != http.StatusOK || r.Map(t)["model"] != "local/qwen" || !strings.Contains(string(r.Body), "ctx 256: hello") {
			t.Fatalf("chat = %d %s", r.Status, r.Body)
		}
		l := listing()
		if len(l.Engines) != 1 || l.Engines[0].Model != "local/qwen" || l.Engines[0].PID == 0 || l.MaxResident != 1 {
			t.Fatalf("listing = %+v", l)
		}
		pid := l.Engines[0].PID
		if st := do(http.MethodGet, "/admin/models/local%2Fqwen", nil).Map(t)["state"]; st != "ready" {
			t.Fatalf("state after use = %v", st)
		}
		if r := do(http.MethodPost, "/admin/models/local%2Fqwen:evict", nil); r.Status != http.StatusOK || r.Map(t)["state"] != "stopped" {
			t.Fatalf("evict = %d %s", r.Status, r.Body)
		}
		if syscall.Kill(pid, 0) == nil {
			t.Fatalf("pid %d alive after evict", pid)
		}
		if r := do(http.MethodPost, "/admin/models/local%2Fqwen:warm", nil); r.Status != http.StatusOK || r.Map(t)["state"] != "ready" {
			t.Fatalf("warm = %d %s", r.Status, r.Body)
		}
		pid = listing().Engines[0].PID
		// DELETE evicts, then unregisters.
		if r := do(http.MethodDelete, "/admin/models/local%2Fqwen", nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete = %d %s", r.Status, r.Body)
		}
		if syscall.Kill(pid, 0) == nil || len(listing().Engines) != 0 {
			t.Fatalf("engine of a deleted model still runs (pid %d)", pid)
		}

		// Whisper is absent: its model is unavailable with the install hint, and a request is 503.
		if r := do(http.MethodPut, "/admin/models/stt", map[string]any{"binding": "whisper.cpp", "modelPath": model}); r.Status != http.StatusCreated {
			t.Fatalf("register whisper = %d %s", r.Status, r.Body)
		}
		if v := do(http.MethodGet, "/admin/models/stt", nil).Map(t); v["state"] != "unavailable" || !strings.Contains(v["stateDetail"].(string), "whisper-server") {
			t.Fatalf("whisper state = %v", v)
		}

		if _, err := exec.LookPath("espeak-ng"); err != nil {
			t.Skip("espeak-ng is not installed (apt-get install espeak-ng; .ci/run installs it)")
		}
		if r := do(http.MethodPut, "/admin/models/tts", map[string]any{"binding": "espeak-ng", "voice": "en-us"}); r.Status != http.StatusCreated {
			t.Fatalf("register espeak = %d %s", r.Status, r.Body)
		}
		body, _ := json.Marshal(map[string]any{"model": "tts", "input": "Hello from the inference plane.", "voice": "alloy"})
		resp, err := http.Post(srv.URL+"/v1/audio/speech", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		wav := make([]byte, 12)
		if _, err := io.ReadFull(resp.Body, wav); err != nil && resp.StatusCode == http.StatusOK {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "audio/wav" || string(wav[:4]) != "RIFF" || string(wav[8:12]) != "WAVE" || resp.ContentLength < 10_000 {
			t.Fatalf("speech = %d %s %q %d", resp.StatusCode, resp.Header.Get("Content-Type"), wav, resp.ContentLength)
		}
	})
}

package engines_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/engines"
	"github.com/svc-dev/svc/modules/health"
	"github.com/svc-dev/svc/modules/models"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

func slot(t *testing.T, slots []engines.Slot, engine string, m models.Modality) engines.Slot {
	t.Helper()
	for _, s := range slots {
		if s.Engine == engine && s.Modality == m {
			return s
		}
	}
	t.Fatalf("no slot (%s, %s) in %+v", engine, m, slots)
	return engines.Slot{}
}

// TestDetectsBinariesOnPath uses the real exec.LookPath over a PATH holding one fake engine.
func TestDetectsBinariesOnPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "espeak-ng")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	svc := engines.New(engines.Options{MaxResident: 3})
	slots := svc.Slots()
	if s := slot(t, slots, "espeak-ng", models.ModalitySpeech); !s.Ready || s.Path != bin || s.Reason != "" {
		t.Fatalf("espeak-ng = %+v", s)
	}
	s := slot(t, slots, "llama.cpp", models.ModalityChat)
	if s.Ready || !strings.Contains(s.Reason, "llama-server not found") || !strings.Contains(s.InstallHint, "llama.cpp") {
		t.Fatalf("llama.cpp = %+v", s)
	}
	if s := slot(t, slots, "whisper.cpp", models.ModalityTranscription); s.Ready || s.InstallHint == "" {
		t.Fatalf("whisper.cpp = %+v", s)
	}
	if s := slot(t, slots, "stable-diffusion.cpp", models.ModalityImages); s.Ready || !strings.Contains(s.Reason, "sd not found") {
		t.Fatalf("sd = %+v", s)
	}
	for _, m := range models.AllModalities() {
		if s := slot(t, slots, "hosted-compatible", m); !s.Ready || s.InstallHint != "" {
			t.Fatalf("hosted %s = %+v", m, s)
		}
	}
	// Removing the binary is noticed on the next call, without a restart.
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if s := slot(t, svc.Slots(), "espeak-ng", models.ModalitySpeech); s.Ready || !strings.Contains(s.InstallHint, "apt-get install espeak-ng") {
		t.Fatalf("espeak-ng after removal = %+v", s)
	}
}

func TestEnginesListingAndReadyz(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		svc := engines.New(engines.Options{MaxResident: 4, LookPath: func(string) (string, error) { return "", errors.New("absent") }})
		srv := testkit.New(t, testkit.Options{}, engines.NewModule(svc),
			health.New(svc.Report, health.Check{Name: "database", Fn: db.Ready}, health.Check{Name: "engines", Fn: svc.AnyReady}))

		r := srv.Do(http.MethodGet, "/admin/engines", nil)
		var l engines.Listing
		r.JSON(t, &l)
		if r.Status != http.StatusOK || l.MaxResident != 4 || l.Engines == nil || len(l.Engines) != 0 || len(l.Readiness) < 9 {
			t.Fatalf("listing: %d %s", r.Status, r.Body)
		}
		if !strings.Contains(string(r.Body), `"engines":[]`) {
			t.Fatalf("engines must be an empty list, not null: %s", r.Body)
		}

		// Every local engine missing, hosted available: still ready.
		r = srv.Do(http.MethodGet, "/readyz", nil)
		var ready struct {
			Status  string         `json:"status"`
			Engines []engines.Slot `json:"engines"`
		}
		r.JSON(t, &ready)
		if r.Status != http.StatusOK || ready.Status != "ok" || slot(t, ready.Engines, "llama.cpp", models.ModalityChat).Ready || !slot(t, ready.Engines, "hosted-compatible", models.ModalityChat).Ready {
			t.Fatalf("readyz: %d %s", r.Status, r.Body)
		}

		// The database going away makes the plane not ready.
		_ = db.Close()
		if r := srv.Do(http.MethodGet, "/readyz", nil); r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "not_ready" {
			t.Fatalf("readyz without database: %d %s", r.Status, r.Body)
		}
	})
}

func TestNoEngineAvailable(t *testing.T) {
	svc := engines.New(engines.Options{
		Defs:     []engines.Def{{Name: "llama.cpp", Binary: "llama-server", Modalities: []models.Modality{models.ModalityChat}, InstallHint: "build it"}},
		LookPath: func(string) (string, error) { return "", errors.New("absent") },
	})
	if err := svc.AnyReady(context.Background()); !errors.Is(err, engines.ErrEngineUnavailable) {
		t.Fatalf("AnyReady = %v", err)
	}
}

func TestHostedWarmEvictAreNoOps(t *testing.T) {
	svc := engines.New(engines.Options{})
	m := &models.Model{ID: "x", Binding: models.BindingHostedCompatible, BaseURL: "https://api.example.com/v1"}
	ctx := context.Background()
	if st := svc.State(ctx, m); st.State != models.StateRemote {
		t.Fatalf("state = %+v", st)
	}
	st, err := svc.Warm(ctx, m)
	if err != nil || st.State != models.StateRemote || !strings.Contains(st.Detail, "no-op") || !strings.Contains(st.Detail, "api.example.com") {
		t.Fatalf("warm = %+v %v", st, err)
	}
	st, err = svc.Evict(ctx, m)
	if err != nil || st.State != models.StateRemote || !strings.Contains(st.Detail, "no-op") {
		t.Fatalf("evict = %+v %v", st, err)
	}
	future := &models.Model{ID: "y", Binding: "llama.cpp"}
	if _, err := svc.Warm(ctx, future); !errors.Is(err, engines.ErrEngineUnavailable) {
		t.Fatalf("warm unknown binding = %v", err)
	}
	if st := svc.State(ctx, future); st.State != models.StateUnavailable {
		t.Fatalf("state unknown binding = %+v", st)
	}
}

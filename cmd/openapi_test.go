package cmd

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/config"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/events"
	"github.com/svc-dev/svc/platform/openapi"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

// testDeps builds the shared collaborators on a fresh SQLite database.
func testDeps(t *testing.T) *deps {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	db, err := database.Open(context.Background(), "", filepath.Join(cfg.DataDir, "svc.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	bus := events.NewBus(events.Options{})
	t.Cleanup(bus.Close)
	return &deps{cfg: cfg, log: zerolog.Nop(), db: db, keys: secrets.Ephemeral(), bus: bus}
}

// TestOpenAPICoversEveryRoute fails when a registered route is missing from a plane's
// OpenAPI document.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	d := testDeps(t)
	for name, build := range map[string]func(context.Context, *deps) (*plane, error){"control": buildControl, "inference": buildInference} {
		t.Run(name, func(t *testing.T) {
			p, err := build(context.Background(), d)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(p.echo)
			defer srv.Close()
			r := testkit.Do(t, srv.URL, "GET", "/openapi.json", nil)
			if r.Status != 200 {
				t.Fatalf("openapi.json: %d", r.Status)
			}
			missing, err := openapi.Missing(p.echo, r.Body)
			if err != nil {
				t.Fatal(err)
			}
			if len(missing) > 0 {
				t.Fatalf("routes missing from /openapi.json: %v", missing)
			}
		})
	}
}

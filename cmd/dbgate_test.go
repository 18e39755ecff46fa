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
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

// TestDatabaseGate: before migrations have run (a database that is down at start), health,
// docs and the static UI answer, and every other route is 503 database_unavailable.
func TestDatabaseGate(t *testing.T) {
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	db, err := database.Open(context.Background(), "", filepath.Join(cfg.DataDir, "svc.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	bus := events.NewBus(events.Options{})
	t.Cleanup(bus.Close)
	d := &deps{cfg: cfg, log: zerolog.Nop(), db: db, keys: secrets.Ephemeral(), bus: bus}
	p, err := buildControl(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.echo)
	defer srv.Close()
	for _, path := range []string{"/healthz", "/openapi.json", "/ui/", "/ui/config.json"} {
		if r := testkit.Do(t, srv.URL, "GET", path, nil); r.Status != 200 {
			t.Fatalf("%s while unmigrated: %d %s", path, r.Status, r.Body)
		}
	}
	if r := testkit.Do(t, srv.URL, "GET", "/readyz", nil); r.Status != 503 {
		t.Fatalf("readyz while unmigrated: %d", r.Status)
	}
	for _, path := range []string{"/agents", "/runs", "/sessions"} {
		if r := testkit.Do(t, srv.URL, "GET", path, nil); r.Status != 503 || r.ErrorCode() != "database_unavailable" {
			t.Fatalf("%s while unmigrated: %d %s", path, r.Status, r.Body)
		}
	}
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := testkit.Do(t, srv.URL, "GET", "/agents", nil); r.Status != 200 {
		t.Fatalf("/agents after migrations: %d %s", r.Status, r.Body)
	}
}

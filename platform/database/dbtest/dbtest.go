// Package dbtest gives each test an isolated, migrated database: a SQLite file in a temp
// dir always, and a fresh PostgreSQL schema when SERVICE_TEST_DATABASE_URL is set.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/platform/database"
)

// EnvURL names the variable that enables the PostgreSQL leg of the tests.
const EnvURL = "SERVICE_TEST_DATABASE_URL"

// Dialects returns the dialects under test: sqlite always, postgres when configured.
func Dialects() []string {
	if os.Getenv(EnvURL) != "" {
		return []string{database.SQLite, database.Postgres}
	}
	return []string{database.SQLite}
}

// Each runs fn as a subtest once per dialect, each with its own fresh database.
func Each(t *testing.T, fn func(t *testing.T, db *database.DB)) {
	t.Helper()
	for _, d := range Dialects() {
		t.Run(d, func(t *testing.T) {
			fn(t, Open(t, d))
		})
	}
}

// Open returns a fresh migrated database of the dialect, removed when the test ends.
func Open(t testing.TB, dialect string) *database.DB {
	t.Helper()
	ctx := context.Background()
	var (
		db  *database.DB
		err error
	)
	switch dialect {
	case database.SQLite:
		db, err = database.Open(ctx, "", filepath.Join(t.TempDir(), "svc.db"))
	case database.Postgres:
		u := URL(t)
		db, err = database.Open(ctx, u, "")
	default:
		t.Fatalf("unknown dialect %q", dialect)
	}
	if err != nil {
		t.Fatalf("open %s: %v", dialect, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate %s: %v", dialect, err)
	}
	return db
}

// URL creates a fresh schema on the test PostgreSQL and returns a URL whose search_path
// points at it; the schema is dropped when the test ends. It fails the test when
// SERVICE_TEST_DATABASE_URL is set but unreachable, and skips when it is unset.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		t.Skip(EnvURL + " not set")
	}
	admin, err := database.Open(context.Background(), base, "")
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer admin.Close()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatalf("postgres unreachable or refused CREATE SCHEMA: %v", err)
	}
	t.Cleanup(func() {
		a, err := database.Open(context.Background(), base, "")
		if err != nil {
			return
		}
		defer a.Close()
		a.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("bad %s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

package database_test

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"gorm.io/gorm"
)

type metaRow struct {
	Key   string `gorm:"primaryKey"`
	Value string
}

func (metaRow) TableName() string { return "svc_meta" }

func TestOpenMigrateTx(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		if err := db.Ready(ctx); err != nil {
			t.Fatalf("ready: %v", err)
		}
		// Migrate twice is a no-op.
		if err := db.Migrate(ctx); err != nil {
			t.Fatalf("re-migrate: %v", err)
		}
		if err := db.Tx(ctx, func(tx *gorm.DB) error { return tx.Create(&metaRow{"a", "1"}).Error }); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		err := db.Tx(ctx, func(tx *gorm.DB) error {
			if err := tx.Create(&metaRow{"b", "2"}).Error; err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("want boom, got %v", err)
		}
		var n int64
		db.Model(&metaRow{}).Count(&n)
		if n != 1 {
			t.Fatalf("rollback failed: %d rows", n)
		}
		err = db.Create(&metaRow{"a", "again"}).Error
		if !database.IsDuplicate(err) {
			t.Fatalf("want duplicate key, got %v", err)
		}
		var r metaRow
		if err := db.First(&r, "key = ?", "zzz").Error; !database.IsNotFound(err) {
			t.Fatalf("want not found, got %v", err)
		}
	})
}

func TestPostgresDownIsNotReady(t *testing.T) {
	db, err := database.Open(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1", "")
	if err != nil {
		t.Fatalf("open must not need the server: %v", err)
	}
	defer db.Close()
	if err := db.Ready(context.Background()); err == nil {
		t.Fatal("ready with no server")
	}
}

func TestCursorRoundTrip(t *testing.T) {
	c := database.Cursor{At: time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC), ID: "agt_1"}
	got, err := database.DecodeCursor(c.Encode())
	if err != nil || !got.At.Equal(c.At) || got.ID != c.ID {
		t.Fatalf("round trip: %v %v", got, err)
	}
	crafted := func(id string) string {
		return base64.RawURLEncoding.EncodeToString([]byte("2026-01-02T03:04:05Z|" + id))
	}
	for _, bad := range []string{"", "!!", "bm9waXBl", "MjAyNnw=", crafted("a\x00b"), crafted("\xff\xfe"), crafted("a\nb")} {
		if _, err := database.DecodeCursor(bad); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}
}

// TestConcurrentWritersWait proves SQLite transactions start IMMEDIATE and wait on the busy
// timeout instead of failing with "database is locked".
func TestConcurrentWritersWait(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		errs := make(chan error, 16)
		for i := 0; i < 16; i++ {
			go func(i int) {
				errs <- db.Tx(ctx, func(tx *gorm.DB) error {
					var n int64
					if err := tx.Model(&metaRow{}).Count(&n).Error; err != nil {
						return err
					}
					return tx.Create(&metaRow{Key: string(rune('a' + i)), Value: "v"}).Error
				})
			}(i)
		}
		for i := 0; i < 16; i++ {
			if err := <-errs; err != nil {
				t.Fatalf("writer failed: %v", err)
			}
		}
	})
}

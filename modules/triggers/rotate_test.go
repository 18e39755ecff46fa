package triggers

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/secrets"
)

func TestRotateSecrets(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		oldKey, newKey := strings.Repeat("a", 64), strings.Repeat("b", 64)
		oldRing, err := secrets.ParseKeys(oldKey)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := NewService(db, oldRing, fakePins{}, &fakeRuns{}, zerolog.Nop(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		wh, err := svc.Create(ctx, CreateInput{AgentID: ptr("greeter"), Kind: ptr(KindWebhook), Version: ptr("1"), Config: []byte(`{"secret":"` + secret1 + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		both, err := secrets.ParseKeys(newKey + "," + oldKey)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := RotateSecrets(ctx, db, both); n != 1 || err != nil {
			t.Fatalf("rotate: %d %v", n, err)
		}
		if n, err := RotateSecrets(ctx, db, both); n != 0 || err != nil {
			t.Fatalf("second rotate: %d %v", n, err)
		}
		// Only the new key is left: deliveries still verify.
		newRing, _ := secrets.ParseKeys(newKey)
		svc.keys = newRing
		body := []byte(`{}`)
		if _, err := svc.Deliver(ctx, wh.ID, body, Sign([]byte(secret1), body)); err != nil {
			t.Fatalf("deliver after rotation: %v", err)
		}
		// A secret no configured key decrypts is listed and left alone.
		other, _ := secrets.ParseKeys(strings.Repeat("c", 64))
		if n, err := RotateSecrets(ctx, db, other); n != 0 || err == nil || !strings.Contains(err.Error(), wh.ID) || strings.Contains(err.Error(), secret1) {
			t.Fatalf("undecryptable: %d %v", n, err)
		}
	})
}

func ptr(s string) *string { return &s }

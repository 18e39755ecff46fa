package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/connections"
	"github.com/svc-dev/svc/modules/credentials"
	"github.com/svc-dev/svc/platform/config"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/secrets"
)

// rotateDB opens a migrated database of dialect and returns the flags that point the CLI
// at the same database.
func rotateDB(t *testing.T, dialect string) (*database.DB, []string) {
	t.Helper()
	ctx := context.Background()
	var (
		db    *database.DB
		err   error
		flags []string
	)
	if dialect == database.Postgres {
		u := dbtest.URL(t)
		db, err = database.Open(ctx, u, "")
		flags = []string{"--database-url", u}
	} else {
		dir := t.TempDir()
		db, err = database.Open(ctx, "", filepath.Join(dir, "svc.db"))
		flags = []string{"--data-dir", dir, "--database-url", ""}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return db, flags
}

func runRotate(t *testing.T, flags []string, keySpec string) (string, error) {
	t.Helper()
	t.Setenv("SERVICE_SECRET_KEY", keySpec) // as an operator would: not on the command line
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"secrets", "rotate"}, flags...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func mustKeys(t *testing.T, spec string) *secrets.Keyring {
	t.Helper()
	k, err := secrets.ParseKeys(spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSecretsRotate: connection secrets and inference credentials written under key A are
// re-encrypted by `svc secrets rotate` with "B,A" and then work with B alone; a second run
// is a no-op; a secret no key decrypts is reported (exit status 1) and left unchanged.
func TestSecretsRotate(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			db, flags := rotateDB(t, dialect)
			keyA, keyB := randomSecretKey(t), randomSecretKey(t)
			ringA := mustKeys(t, keyA)

			conns := newConnectionService(t, db, keyA)
			for _, n := range []string{"c1", "c2"} {
				if _, err := conns.Create(ctx, connections.CreateInput{Name: pointerTo(n), Kind: pointerTo("http_auth"), Config: json.RawMessage(`{"type":"query","param":"k"}`), Secret: pointerTo("v-" + n)}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := conns.Create(ctx, connections.CreateInput{Name: pointerTo("nosecret"), Kind: pointerTo("mcp_server"), Config: json.RawMessage(`{"server":"s"}`)}); err != nil {
				t.Fatal(err)
			}
			noEnv := func(string) string { return "" }
			if _, err := credentials.New(db, ringA, noEnv).Set(ctx, "OPENAI_KEY", "sk-a"); err != nil {
				t.Fatal(err)
			}

			out, err := runRotate(t, flags, keyB+","+keyA)
			if err != nil {
				t.Fatalf("rotate: %v\n%s", err, out)
			}
			if !strings.Contains(out, "connections: 2 re-encrypted") || !strings.Contains(out, "inference credentials: 1 re-encrypted") {
				t.Fatalf("output:\n%s", out)
			}
			if strings.Contains(out, "v-c1") || strings.Contains(out, "sk-a") || strings.Contains(out, keyA) || strings.Contains(out, keyB) {
				t.Fatalf("output carries a secret or key:\n%s", out)
			}
			if out, err := runRotate(t, flags, keyB+","+keyA); err != nil || !strings.Contains(out, "connections: 0 re-encrypted") || !strings.Contains(out, "inference credentials: 0 re-encrypted") {
				t.Fatalf("second run: %v\n%s", err, out)
			}

			// Key A is gone: everything still works under B.
			onlyB := newConnectionService(t, db, keyB)
			for _, n := range []string{"c1", "c2"} {
				c, err := onlyB.Resolve(ctx, n)
				if err != nil || c.Query["k"] != "v-"+n {
					t.Fatalf("%s under B: %v", n, err)
				}
			}
			if v, err := credentials.New(db, mustKeys(t, keyB), noEnv).ResolveRef(ctx, "secret://OPENAI_KEY"); err != nil || v != "sk-a" {
				t.Fatalf("credential under B: %v", err)
			}

			// A connection under a key nobody has any more: reported, exit 1, unchanged.
			lost, err := newConnectionService(t, db, randomSecretKey(t)).Create(ctx, connections.CreateInput{Name: pointerTo("lost"), Kind: pointerTo("http_auth"), Config: json.RawMessage(`{"type":"header"}`), Secret: pointerTo("x")})
			if err != nil {
				t.Fatal(err)
			}
			out, err = runRotate(t, flags, keyB)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(out, lost.ID) {
				t.Fatalf("undecryptable: %v\n%s", err, out)
			}
			if got, _ := onlyB.Get(ctx, "lost"); got.SecretStatus != connections.SecretUndecryptable {
				t.Fatalf("lost: %+v", got)
			}
		})
	}
}

func TestSecretsRotateNeedsKey(t *testing.T) {
	_, flags := rotateDB(t, database.SQLite)
	for _, spec := range []string{"", "not-a-key"} {
		_, err := runRotate(t, flags, spec)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Env != "SERVICE_SECRET_KEY" {
			t.Fatalf("%q: %v", spec, err)
		}
		if spec != "" && strings.Contains(err.Error(), spec) {
			t.Fatalf("error echoes the key: %v", err)
		}
	}
}

package cmd

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/connections"
	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/secrets"
)

// TestToolConnectionThroughRuntime runs a graph whose http tool uses a connection through
// the real runtime and the adapter: the credential is applied; after a restart without the
// key, and when disabled or deleted, the tool's err port carries the named code and the
// upstream is never called.
func TestToolConnectionThroughRuntime(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		var calls atomic.Int32
		var lastAuth atomic.Value
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			lastAuth.Store(r.Header.Get("Authorization"))
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"ok":true}`)
		}))
		defer upstream.Close()

		keyA := randomSecretKey(t)
		svcA := newConnectionService(t, db, keyA)
		if _, err := svcA.Create(ctx, connections.CreateInput{
			Name: pointerTo("api"), Kind: pointerTo(connections.KindHTTPAuth),
			Config: json.RawMessage(`{"type":"header"}`), Secret: pointerTo("tok-A"),
		}); err != nil {
			t.Fatal(err)
		}
		g, err := graph.Decode(json.RawMessage(fmt.Sprintf(`{"nodes":[
			{"id":"call","kind":"tool","tool":{"type":"http","url":%q,"connection":"api"}},
			{"id":"ok","kind":"output"},
			{"id":"bad","kind":"output","value":{"failed":"$in.in"}}],
			"edges":[{"source":"call","target":"ok"},{"source":"call","sourcePort":"err","target":"bad"}]}`, upstream.URL)))
		if err != nil {
			t.Fatal(err)
		}
		run := func(svc *connections.Service) runtime.Result {
			return runtime.New(runtime.Deps{Connections: runtimeConnections{svc}}).Run(ctx, runtime.Spec{RunID: "run_t", Graph: g, Input: map[string]any{}})
		}
		failedCode := func(res runtime.Result) string {
			m, _ := res.Output.(map[string]any)
			f, _ := m["failed"].(map[string]any)
			c, _ := f["code"].(string)
			return c
		}

		res := run(svcA)
		if res.Status != runtime.StatusCompleted || failedCode(res) != "" || calls.Load() != 1 || lastAuth.Load() != "Bearer tok-A" {
			t.Fatalf("with key A: %s %v (calls %d, auth %v)", res.Status, res.Output, calls.Load(), lastAuth.Load())
		}

		// Restart with another key only: undecryptable → err, no call, run still completes.
		res = run(newConnectionService(t, db, randomSecretKey(t)))
		if res.Status != runtime.StatusCompleted || failedCode(res) != "connection_undecryptable" || calls.Load() != 1 {
			t.Fatalf("without key A: %s %v (calls %d)", res.Status, res.Output, calls.Load())
		}
		if _, err := svcA.Update(ctx, "api", connections.UpdateInput{Enabled: pointerTo(false)}); err != nil {
			t.Fatal(err)
		}
		if res = run(svcA); failedCode(res) != "connection_disabled" || calls.Load() != 1 {
			t.Fatalf("disabled: %v", res.Output)
		}
		if err := svcA.Delete(ctx, "api"); err != nil {
			t.Fatal(err)
		}
		if res = run(svcA); failedCode(res) != "connection_not_found" || calls.Load() != 1 {
			t.Fatalf("deleted: %v", res.Output)
		}
	})
}

func newConnectionService(t *testing.T, db *database.DB, key string) *connections.Service {
	t.Helper()
	keys, err := secrets.ParseKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := connections.NewService(db, keys, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func randomSecretKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func pointerTo[T any](v T) *T { return &v }

package cmd

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
	"github.com/svc-dev/svc/platform/config"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/events"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

// TestDataPlaneOverRegistry drives /v1 through the real model registry and credential
// store (SQLite, and PostgreSQL when SERVICE_TEST_DATABASE_URL is set).
func TestDataPlaneOverRegistry(t *testing.T) {
	const stored, fromEnv = "sk-stored-0123456789", "sk-env-9876543210"
	t.Setenv("SVC_DP_TEST_ENV_KEY", fromEnv)
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		cfg := config.Defaults()
		cfg.DataDir = t.TempDir()
		bus := events.NewBus(events.Options{})
		t.Cleanup(bus.Close)
		d := &deps{cfg: cfg, log: zerolog.Nop(), db: db, keys: secrets.Ephemeral(), bus: bus}
		p, err := buildInference(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(p.echo)
		t.Cleanup(srv.Close)
		up := dataplanetest.New(dataplanetest.Script{})
		t.Cleanup(up.Close)
		do := func(method, path string, body any) *testkit.Response {
			return testkit.Do(t, srv.URL, method, path, body)
		}

		if r := do("PUT", "/admin/credentials/SVC_DP_KEY", map[string]any{"value": stored}); r.Status/100 != 2 {
			t.Fatalf("put credential: %d %s", r.Status, r.Body)
		}
		for id, ref := range map[string]string{"chat": "secret://SVC_DP_KEY", "envchat": "secret://SVC_DP_TEST_ENV_KEY", "nokey": "secret://SVC_DP_ABSENT"} {
			r := do("PUT", "/admin/models/"+id, map[string]any{"binding": "hosted-compatible", "baseUrl": up.BaseURL(), "model": "provider-" + id, "credentialRef": ref, "maxTokens": 64})
			if r.Status/100 != 2 {
				t.Fatalf("put model %s: %d %s", id, r.Status, r.Body)
			}
		}

		r := do("GET", "/v1/models", nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), `"id":"chat"`) || !strings.Contains(string(r.Body), `"owned_by":"svc"`) {
			t.Fatalf("/v1/models = %d %s", r.Status, r.Body)
		}

		for id, key := range map[string]string{"chat": stored, "envchat": fromEnv} {
			r = do("POST", "/v1/chat/completions", `{"model":"`+id+`","messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", id, r.Status, r.Body)
			}
			got := up.Last()
			if got.JSON["model"] != "provider-"+id || got.Header.Get("Authorization") != "Bearer "+key || got.JSON["max_tokens"] != float64(64) {
				t.Errorf("%s: upstream got model %v, auth ok %v, max_tokens %v", id, got.JSON["model"], got.Header.Get("Authorization") == "Bearer "+key, got.JSON["max_tokens"])
			}
		}

		r = do("POST", "/v1/chat/completions", `{"model":"llama-server","messages":[]}`)
		if r.Status != 404 || r.ErrorCode() != "model_not_found" {
			t.Errorf("engine name: %d %s", r.Status, r.Body)
		}
		r = do("POST", "/v1/embeddings", `{"model":"nokey","input":"x"}`)
		if r.Status != 502 || r.ErrorCode() != "credential_error" || !strings.Contains(string(r.Body), "SVC_DP_ABSENT") {
			t.Errorf("unresolvable credential: %d %s", r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), stored) || strings.Contains(string(r.Body), fromEnv) {
			t.Errorf("a credential value leaks: %s", r.Body)
		}
	})
}

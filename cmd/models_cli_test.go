package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/credentials"
	"github.com/svc-dev/svc/modules/engines"
	"github.com/svc-dev/svc/modules/models"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

// cliServer runs the inference plane's admin modules on a real HTTP server.
func cliServer(t *testing.T, db *database.DB) (*testkit.Server, *credentials.Service) {
	t.Helper()
	creds := credentials.New(db, secrets.Ephemeral(), func(string) string { return "" })
	eng := engines.New(engines.Options{MaxResident: 2})
	svc := models.New(db, eng, creds, models.Options{})
	return testkit.New(t, testkit.Options{}, models.NewModule(svc), credentials.NewModule(creds), engines.NewModule(eng)), creds
}

// runCLI runs the root command in-process.
func runCLI(t *testing.T, stdin string, args ...string) (stdout string, err error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), err
}

func TestModelsCLI(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv, _ := cliServer(t, db)
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/v1/models":
				_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"m","object":"model","context_length":8192}]}`))
			case "/v1/chat/completions":
				_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
			default:
				w.WriteHeader(http.StatusNotFound)
			}
		}))
		defer up.Close()
		url := "--inference-url=" + srv.URL

		out, err := runCLI(t, "", "models", "put", "org/chat", url, "--base-url", up.URL+"/v1", "--model", "m", "--max-tokens", "256", "--modality", "chat")
		if err != nil || !strings.Contains(out, `"id": "org/chat"`) || !strings.Contains(out, `"maxTokens": 256`) {
			t.Fatalf("put: %v\n%s", err, out)
		}
		file := filepath.Join(t.TempDir(), "model.json")
		if err := os.WriteFile(file, []byte(`{"binding":"hosted-compatible","baseUrl":"https://api.example.com/v1","model":"gpt-x","credentialRef":"secret://KEY"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := runCLI(t, "", "models", "put", "gpt", url, "--file", file); err != nil || !strings.Contains(out, `"credentialRef": "secret://KEY"`) {
			t.Fatalf("put --file: %v\n%s", err, out)
		}
		if _, err := runCLI(t, "", "models", "put", "gpt", url, "--file", file, "--model", "x"); err == nil {
			t.Fatal("--file with --model accepted")
		}

		out, err = runCLI(t, "", "models", "list", url)
		if err != nil || !strings.Contains(out, "gpt") || !strings.Contains(out, "org/chat") || !strings.Contains(out, "remote") {
			t.Fatalf("list: %v\n%s", err, out)
		}
		if out, err := runCLI(t, "", "models", "get", "org/chat", url); err != nil || !strings.Contains(out, `"state": "remote"`) {
			t.Fatalf("get: %v\n%s", err, out)
		}
		for _, action := range []string{"warm", "evict"} {
			if out, err := runCLI(t, "", "models", action, "org/chat", url); err != nil || !strings.Contains(out, `"action": "`+action+`"`) || !strings.Contains(out, "no-op") {
				t.Fatalf("%s: %v\n%s", action, err, out)
			}
		}
		out, err = runCLI(t, "", "models", "caps", "org/chat", url)
		var caps models.Capabilities
		if err != nil || json.Unmarshal([]byte(out), &caps) != nil || caps.MaxContext == nil || *caps.MaxContext != 8192 {
			t.Fatalf("caps: %v\n%s", err, out)
		}
		if out, err := runCLI(t, "", "models", "caps", "org/chat", url, "--refresh"); err != nil || !strings.Contains(out, `"cached": false`) {
			t.Fatalf("caps --refresh: %v\n%s", err, out)
		}

		if out, err := runCLI(t, "", "models", "rm", "org/chat", url); err != nil || !strings.Contains(out, "deleted org/chat") {
			t.Fatalf("rm: %v\n%s", err, out)
		}
		// Errors: the envelope's code and message, nonzero exit.
		_, err = runCLI(t, "", "models", "get", "org/chat", url)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code == 0 || !strings.Contains(err.Error(), "model_not_found") {
			t.Fatalf("get deleted: %v", err)
		}
		_, err = runCLI(t, "", "models", "put", "bad", url, "--base-url", "ftp://x", "--model", "m")
		if err == nil || !strings.Contains(err.Error(), "invalid_base_url") {
			t.Fatalf("bad put: %v", err)
		}
		// Unreachable plane.
		_, err = runCLI(t, "", "models", "list", "--inference-url=http://127.0.0.1:1")
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("unreachable: %v", err)
		}
		// SERVICE_INFERENCE_URL is honoured when the flag is absent.
		t.Setenv("SERVICE_INFERENCE_URL", srv.URL)
		if out, err := runCLI(t, "", "models", "list"); err != nil || !strings.Contains(out, "gpt") {
			t.Fatalf("list via env: %v\n%s", err, out)
		}
	})
}

func TestCredentialsCLI(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv, creds := cliServer(t, db)
		url := "--inference-url=" + srv.URL
		const value = "sk-cli-secret-value"
		out, err := runCLI(t, value+"\n", "credentials", "set", "OPENAI_KEY", url)
		if err != nil || strings.TrimSpace(out) != "stored OPENAI_KEY" {
			t.Fatalf("set: %v\n%s", err, out)
		}
		got, err := creds.ResolveRef(t.Context(), "secret://OPENAI_KEY")
		if err != nil || got != value {
			t.Fatalf("stored value = %q %v (trailing newline must be dropped)", got, err)
		}
		// Never from argv.
		if _, err := runCLI(t, "", "credentials", "set", "OPENAI_KEY", value, url); err == nil || strings.Contains(err.Error(), value) {
			t.Fatalf("value on argv: %v", err)
		}
		if _, err := runCLI(t, "", "credentials", "set", "EMPTY", url); err == nil {
			t.Fatal("empty stdin accepted")
		}
		out, err = runCLI(t, "", "credentials", "list", url)
		if err != nil || !strings.Contains(out, "OPENAI_KEY") || !strings.Contains(out, "true") || strings.Contains(out, value) || strings.Contains(out, "EMPTY") {
			t.Fatalf("list: %v\n%s", err, out)
		}
		if _, err := runCLI(t, "x", "credentials", "set", "bad-name", url); err == nil || !strings.Contains(err.Error(), "invalid_credential_name") {
			t.Fatalf("bad name: %v", err)
		}
		if out, err := runCLI(t, "", "credentials", "rm", "OPENAI_KEY", url); err != nil || !strings.Contains(out, "deleted OPENAI_KEY") {
			t.Fatalf("rm: %v\n%s", err, out)
		}
		if _, err := runCLI(t, "", "credentials", "rm", "OPENAI_KEY", url); err == nil || !strings.Contains(err.Error(), "credential_not_found") {
			t.Fatalf("rm again: %v", err)
		}
	})
}

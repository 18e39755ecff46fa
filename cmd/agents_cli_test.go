package cmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/agents"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

func TestAgentsCLI(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		svc, err := agents.NewService(db)
		if err != nil {
			t.Fatal(err)
		}
		srv := testkit.New(t, testkit.Options{}, agents.New(svc))
		flag := "--control-url=" + srv.URL
		dir := t.TempDir()
		write := func(name, body string) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}
		v1 := write("v1.json", `{"id":"greeter","nodes":[{"id":"out","kind":"output"}]}`)
		v2 := write("v2.json", `{"id":"greeter","nodes":[{"id":"out","kind":"output","value":"$in.in.name"}]}`)
		bad := write("bad.json", `{"id":"greeter","nodes":[{"id":"out","kind":"outptu"}]}`)

		out, err := runCLI(t, "", "agents", "publish", v1, flag, "--name", "Greeter")
		if err != nil || !strings.Contains(out, "created agent greeter version 1 sha256:") {
			t.Fatalf("publish v1: %q %v", out, err)
		}
		out, err = runCLI(t, "", "agents", "publish", v2, flag)
		if err != nil || !strings.Contains(out, "published greeter version 2") {
			t.Fatalf("publish v2: %q %v", out, err)
		}
		out, err = runCLI(t, "", "agents", "publish", v1, flag, "--version", "2")
		var ee *exitError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "version_conflict") {
			t.Fatalf("conflicting publish: %q %v", out, err)
		}
		if _, err = runCLI(t, "", "agents", "publish", bad, flag); err == nil || !strings.Contains(err.Error(), "invalid_ir") {
			t.Fatalf("bad IR: %v", err)
		}
		out, err = runCLI(t, "", "agents", "list", flag)
		if err != nil || !strings.Contains(out, "greeter") || !strings.Contains(out, "Greeter") {
			t.Fatalf("list: %q %v", out, err)
		}
		out, err = runCLI(t, "", "agents", "get", "greeter", flag)
		if err != nil || !strings.Contains(out, `"version": "2"`) {
			t.Fatalf("get: %q %v", out, err)
		}
		out, err = runCLI(t, "", "agents", "get", "greeter", "--version", "1", flag)
		if err != nil || !strings.Contains(out, `"kind": "output"`) {
			t.Fatalf("get version: %q %v", out, err)
		}
		if _, err = runCLI(t, "", "agents", "get", "nope", flag); err == nil || !strings.Contains(err.Error(), "agent_not_found") {
			t.Fatalf("get unknown: %v", err)
		}
	})
}

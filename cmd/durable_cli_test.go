package cmd

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/runs"
	"github.com/svc-dev/svc/platform/testkit"
)

// TestDurableCLI starts, follows and resumes a durable run through the CLI against the real
// control-plane composition root.
func TestDurableCLI(t *testing.T) {
	d := testDeps(t)
	d.cfg.Durable = true
	d.cfg.DurableLease = 2 * time.Second
	p, err := buildControl(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range p.modules {
		if dm, ok := m.(*runs.Durable); ok {
			if err := dm.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = dm.Stop(context.Background()) })
		}
	}
	srv := httptest.NewServer(p.echo)
	defer srv.Close()
	flag := "--control-url=" + srv.URL
	ir := `{"id":"ask","nodes":[{"id":"h","kind":"human","prompt":"Hello $in.in.who?"},{"id":"o","kind":"output"}],"edges":[{"source":"h","target":"o"}]}`
	if r := testkit.Do(t, srv.URL, "POST", "/agents", map[string]any{"ir": json.RawMessage(ir)}); r.Status != 201 {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	out, err := runCLI(t, "", "runs", "durable", "ask", "--input", `{"who":"Ada"}`, flag)
	id := strings.TrimSpace(out)
	if err != nil || !strings.HasPrefix(id, "run_") {
		t.Fatalf("runs durable: %q %v", out, err)
	}
	wait := func(status string) map[string]any {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			m := testkit.Do(t, srv.URL, "GET", "/runs/"+id, nil).Map(t)
			if m["status"] == status {
				return m
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("run %s never %s", id, status)
		return nil
	}
	if m := wait(runs.StatusWaiting); m["prompt"] != "Hello Ada?" {
		t.Fatalf("waiting run: %v", m)
	}
	if _, err := runCLI(t, "", "runs", "resume", id, "--input", "yes", flag); err == nil || !strings.Contains(err.Error(), "JSON") {
		t.Fatalf("resume with non-JSON input: %v", err)
	}
	if out, err := runCLI(t, "", "runs", "resume", id, "--input", `"yes"`, flag); err != nil || !strings.Contains(out, "resumed "+id) {
		t.Fatalf("resume: %q %v", out, err)
	}
	if m := wait(runs.StatusCompleted); m["output"] != "yes" {
		t.Fatalf("completed run: %v", m)
	}
	if _, err := runCLI(t, "", "runs", "resume", id, "--input", `"again"`, flag); err == nil || !strings.Contains(err.Error(), "run_not_waiting") {
		t.Fatalf("second resume: %v", err)
	}
}

package cmd

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/agents"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/modules/triggers"
	"github.com/svc-dev/svc/platform/config"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/events"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

// controlPlane builds the real control plane on db, starts its background work, and serves
// it on a test server.
func controlPlane(t testing.TB, db *database.DB) *httptest.Server {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	bus := events.NewBus(events.Options{})
	t.Cleanup(bus.Close)
	d := &deps{cfg: cfg, log: zerolog.Nop(), db: db, keys: secrets.Ephemeral(), bus: bus}
	p, err := buildControl(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.starters {
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
	}
	srv := httptest.NewServer(p.echo)
	t.Cleanup(srv.Close)
	return srv
}

// TestTriggersEndToEnd drives the CLI and a signed webhook delivery against the real control
// plane: the delivered body runs the greeter agent (IR.md) and the run carries trigger_id.
func TestTriggersEndToEnd(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv := controlPlane(t, db)
		flag := "--control-url=" + srv.URL
		greeter := `{"id":"greeter","nodes":[{"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name}"},{"id":"out","kind":"output","value":"$in.in.greeting"}],"edges":[{"source":"shape","target":"out"}]}`
		if r := testkit.Do(t, srv.URL, "POST", "/agents", `{"ir":`+greeter+`}`); r.Status != 201 {
			t.Fatalf("publish: %d %s", r.Status, r.Body)
		}
		const secret = "end-to-end-webhook-secret"
		out, err := runCLI(t, secret+"\n", "triggers", "create", flag, "--agent", "greeter", "--version", "1", "--secret-stdin")
		if err != nil || strings.Contains(out, secret) {
			t.Fatalf("create webhook: %q %v", out, err)
		}
		var tr triggers.Trigger
		(&testkit.Response{Body: []byte(out)}).JSON(t, &tr)
		if tr.Kind != "webhook" || tr.HookPath != "/hooks/"+tr.ID {
			t.Fatalf("created: %+v", tr)
		}
		if _, err := runCLI(t, "", "triggers", "create", flag, "--agent", "greeter", "--version", "1", "--content-hash", "sha256:"+strings.Repeat("0", 64), "--secret", secret); err == nil || !strings.Contains(err.Error(), "invalid_pin") {
			t.Fatalf("two pins: %v", err)
		}
		if _, err := runCLI(t, "", "triggers", "create", flag, "--agent", "greeter", "--version", "1", "--cron", "0 0 31 2 *"); err == nil || !strings.Contains(err.Error(), "invalid_cron") {
			t.Fatalf("never-firing cron: %v", err)
		}
		out, err = runCLI(t, "", "triggers", "create", flag, "--agent", "greeter", "--version", "1", "--cron", "*/5 * * * *", "--timezone", "Europe/Paris", "--input", `{"name":"Bob"}`)
		if err != nil || !strings.Contains(out, `"kind": "schedule"`) {
			t.Fatalf("create schedule: %q %v", out, err)
		}
		var sch triggers.Trigger
		(&testkit.Response{Body: []byte(out)}).JSON(t, &sch)
		out, err = runCLI(t, "", "triggers", "list", flag)
		if err != nil || !strings.Contains(out, tr.ID) || !strings.Contains(out, "*/5 * * * * (Europe/Paris)") || strings.Contains(out, secret) {
			t.Fatalf("list: %q %v", out, err)
		}

		body := []byte(`{"name":"Ada"}`)
		sig := triggers.SignatureHeader + ": " + triggers.Sign([]byte(secret), body)
		if out, err := runCLI(t, "", "triggers", "disable", tr.ID, flag); err != nil || !strings.Contains(out, "disabled") {
			t.Fatalf("disable: %q %v", out, err)
		}
		if r := testkit.Do(t, srv.URL, "POST", "/hooks/"+tr.ID, body, sig); r.Status != 409 || r.ErrorCode() != "trigger_disabled" {
			t.Fatalf("disabled hook: %d %s", r.Status, r.Body)
		}
		if _, err := runCLI(t, "", "triggers", "enable", tr.ID, flag); err != nil {
			t.Fatal(err)
		}
		r := testkit.Do(t, srv.URL, "POST", "/hooks/"+tr.ID, body, sig)
		if r.Status != 202 {
			t.Fatalf("hook: %d %s", r.Status, r.Body)
		}
		runID, _ := r.Map(t)["run_id"].(string)
		var run map[string]any
		deadline := time.Now().Add(15 * time.Second)
		for {
			run = testkit.Do(t, srv.URL, "GET", "/runs/"+runID, nil).Map(t)
			if run["status"] == "completed" || run["status"] == "failed" || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if run["status"] != "completed" || run["output"] != "Hello, Ada" || run["trigger_id"] != tr.ID {
			t.Fatalf("run: %v", run)
		}

		if out, err := runCLI(t, "", "triggers", "rm", sch.ID, flag); err != nil || !strings.Contains(out, "deleted") {
			t.Fatalf("rm: %q %v", out, err)
		}
		if _, err := runCLI(t, "", "triggers", "rm", sch.ID, flag); err == nil || !strings.Contains(err.Error(), "trigger_not_found") {
			t.Fatalf("rm again: %v", err)
		}
	})
}

// TestScheduleStartsRealRun fires a schedule (on a fake clock) through the composition
// root's adapters into the real runs module: the run completes with the configured input
// and carries trigger_id.
func TestScheduleStartsRealRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		cfg := config.Defaults()
		cfg.DataDir = t.TempDir()
		bus := events.NewBus(events.Options{})
		t.Cleanup(bus.Close)
		d := &deps{cfg: cfg, log: zerolog.Nop(), db: db, keys: secrets.Ephemeral(), bus: bus}
		agentStore, err := agents.NewService(db)
		if err != nil {
			t.Fatal(err)
		}
		runModule, _, _, err := buildRuns(d, agentStore, runtime.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		if err := runModule.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = runModule.Stop(ctx) })
		greeter := `{"id":"greeter","nodes":[{"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name}"},{"id":"out","kind":"output","value":"$in.in.greeting"}],"edges":[{"source":"shape","target":"out"}]}`
		if _, _, err := agentStore.Create(ctx, agents.CreateInput{IR: []byte(greeter)}); err != nil {
			t.Fatal(err)
		}
		clock := clockwork.NewFakeClockAt(time.Date(2031, 1, 1, 9, 59, 30, 0, time.UTC))
		svc, err := triggers.NewService(db, d.keys, triggerPins{agentStore}, triggerRuns{runModule.Service()}, zerolog.Nop(), triggers.Options{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		sched, err := triggers.NewScheduler(svc, zerolog.Nop(), triggers.SchedulerOptions{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		if err := sched.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sched.Stop(ctx) })
		agentID, kind, v := "greeter", "schedule", "1"
		tr, err := svc.Create(ctx, triggers.CreateInput{AgentID: &agentID, Kind: &kind, Version: &v, Config: []byte(`{"cron":"0 10 * * *","input":{"name":"Bob"}}`)})
		if err != nil {
			t.Fatal(err)
		}
		if err := sched.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		waitCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := clock.BlockUntilContext(waitCtx, 1); err != nil {
			t.Fatal(err)
		}
		clock.Advance(30 * time.Second) // 10:00:00
		var status, output string
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			row := db.Raw("SELECT status, COALESCE(output, '') FROM runs WHERE trigger_id = ?", tr.ID).Row()
			if row.Scan(&status, &output) == nil && status == "completed" {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if status != "completed" || !strings.Contains(output, "Hello, Bob") {
			t.Fatalf("scheduled run: status %q output %q", status, output)
		}
	})
}

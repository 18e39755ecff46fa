package triggers

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

// Content hashes of the fake agent versions.
var (
	hashV1 = "sha256:" + strings.Repeat("a1", 32)
	hashV2 = "sha256:" + strings.Repeat("b2", 32)
)

// fakePins knows agent "greeter" with versions 1 (plain) and 2 (needs durable mode).
type fakePins struct{}

func (fakePins) ResolvePin(_ context.Context, agentID, version, hash string) (Pin, error) {
	if agentID != "greeter" {
		return Pin{}, apperr.NotFound("agent_not_found", "agent not found")
	}
	for _, p := range []Pin{{Version: "1", ContentHash: hashV1}, {Version: "2", ContentHash: hashV2, NeedsDurable: true}} {
		if (version != "" && version == p.Version) || (hash != "" && hash == p.ContentHash) {
			return p, nil
		}
	}
	return Pin{}, apperr.NotFound("version_not_found", "version not found")
}

// fakeRuns records the runs the triggers start.
type fakeRuns struct {
	now  func() time.Time // the fake clock: a firing records the window it ran at
	mu   sync.Mutex
	reqs []RunRequest
	at   []time.Time
	err  error
}

func (f *fakeRuns) StartTriggeredRun(_ context.Context, r RunRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", f.err
	}
	f.reqs = append(f.reqs, r)
	if f.now != nil {
		f.at = append(f.at, f.now())
	}
	return "run_" + strings.Repeat("0", 8) + string(rune('a'+len(f.reqs)%26)), nil
}

func (f *fakeRuns) all() []RunRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]RunRequest(nil), f.reqs...)
}

func (f *fakeRuns) times() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.at...)
}

func (f *fakeRuns) count(triggerID string) int {
	n := 0
	for _, r := range f.all() {
		if r.TriggerID == triggerID {
			n++
		}
	}
	return n
}

func (f *fakeRuns) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bundle is a running triggers module and its collaborators.
type bundle struct {
	srv   *testkit.Server
	svc   *Service
	sched *Scheduler
	runs  *fakeRuns
	clock *clockwork.FakeClock
	logs  *syncBuffer
}

// start0 is the fake clock's start: 30 seconds before a minute boundary.
var start0 = time.Date(2031, 3, 4, 10, 0, 30, 0, time.UTC)

type setupOpts struct {
	clock   *clockwork.FakeClock
	elector func(db *database.DB) *AdvisoryElector
	durable bool
}

// setup mounts the module on db behind the real HTTP stack with a started scheduler on a
// fake clock. The poller is slowed right down: tests call Sync to play a poll.
func setup(t *testing.T, db *database.DB, o setupOpts) *bundle {
	t.Helper()
	if o.clock == nil {
		o.clock = clockwork.NewFakeClockAt(start0)
	}
	logs := &syncBuffer{}
	logger := zerolog.New(logs)
	runs := &fakeRuns{now: o.clock.Now}
	svc, err := NewService(db, secrets.Ephemeral(), fakePins{}, runs, logger, Options{Durable: o.durable, Now: o.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	sopts := SchedulerOptions{Poll: time.Hour, Clock: o.clock}
	if o.elector != nil {
		sopts.Elector = o.elector(db)
	}
	sched, err := NewScheduler(svc, logger, sopts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(svc, sched, logger)
	if err != nil {
		t.Fatal(err)
	}
	srv := testkit.New(t, testkit.Options{LogTo: logs}, m)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	return &bundle{srv: srv, svc: svc, sched: sched, runs: runs, clock: o.clock, logs: logs}
}

// create posts a trigger and returns it, failing the test unless it is created.
func (b *bundle) create(t *testing.T, body map[string]any) Trigger {
	t.Helper()
	r := b.srv.Do("POST", "/triggers", body)
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var tr Trigger
	r.JSON(t, &tr)
	return tr
}

func webhookBody(secret string) map[string]any {
	return map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "1", "config": map[string]any{"secret": secret}}
}

func scheduleBody(cron string, input any) map[string]any {
	cfg := map[string]any{"cron": cron}
	if input != nil {
		cfg["input"] = input
	}
	return map[string]any{"agent_id": "greeter", "kind": "schedule", "version": "1", "config": cfg}
}

// eventually polls cond until it holds, failing after a generous bound (no timing claim:
// it only keeps a broken test from hanging).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitTimers blocks until the fake clock has at least n timers (gocron has (re)armed its
// jobs), so that an Advance cannot slip past a job that is not armed yet.
func waitTimers(t *testing.T, c *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d armed jobs: %v", n, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
)

// minute returns the n-th minute boundary after start0.
func minute(n int) time.Time { return start0.Truncate(time.Minute).Add(time.Duration(n) * time.Minute) }

// advanceTo moves the fake clock to at, once every one of the n jobs sharing it is armed.
func advanceTo(t *testing.T, c *clockwork.FakeClock, n int, at time.Time) {
	t.Helper()
	waitTimers(t, c, n)
	c.Advance(at.Sub(c.Now()))
}

func assertTimes(t *testing.T, got []time.Time, want ...time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("runs at %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("runs at %v, want %v", got, want)
		}
	}
}

func TestScheduleFiresAndFollowsChanges(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		tr := b.create(t, scheduleBody("* * * * *", map[string]any{"name": "Ada"}))

		advanceTo(t, b.clock, 1, minute(1))
		eventually(t, "first firing", func() bool { return len(b.runs.all()) == 1 })
		r := b.runs.all()[0]
		if r.TriggerID != tr.ID || r.AgentID != "greeter" || r.Version != "1" || string(r.Input) != `{"name":"Ada"}` {
			t.Fatalf("run request: %+v input %s", r, r.Input)
		}
		var got Trigger
		b.srv.Do("GET", "/triggers/"+tr.ID, nil).JSON(t, &got)
		if got.LastFiredAt == nil || !got.LastFiredAt.Equal(minute(1)) {
			t.Fatalf("last_fired_at: %v", got.LastFiredAt)
		}
		advanceTo(t, b.clock, 1, minute(2))
		eventually(t, "second firing", func() bool { return len(b.runs.all()) == 2 })

		// Disabled: the job is gone at once.
		if r := b.srv.Do("PATCH", "/triggers/"+tr.ID, `{"enabled":false}`); r.Status != 200 {
			t.Fatalf("disable: %d", r.Status)
		}
		if len(b.sched.Scheduled()) != 0 {
			t.Fatalf("still scheduled after disable: %v", b.sched.Scheduled())
		}
		b.clock.Advance(minute(5).Sub(b.clock.Now())) // windows 3, 4, 5 pass while disabled

		// Enabled with a new expression: the missed windows are not backfilled and the new
		// expression applies from the next window on.
		if r := b.srv.Do("PATCH", "/triggers/"+tr.ID, `{"enabled":true,"config":{"cron":"*/2 * * * *","input":{"name":"Bob"}}}`); r.Status != 200 {
			t.Fatalf("enable: %d %s", r.Status, r.Body)
		}
		advanceTo(t, b.clock, 1, minute(6))
		eventually(t, "firing after enable", func() bool { return len(b.runs.all()) == 3 })
		advanceTo(t, b.clock, 1, minute(8)) // minute 7 is odd: no window
		eventually(t, "firing of the new expression", func() bool { return len(b.runs.all()) == 4 })
		assertTimes(t, b.runs.times(), minute(1), minute(2), minute(6), minute(8))
		if in := string(b.runs.all()[3].Input); in != `{"name":"Bob"}` {
			t.Fatalf("input after edit: %s", in)
		}

		// Deleted: gone at once.
		if r := b.srv.Do("DELETE", "/triggers/"+tr.ID, nil); r.Status != 204 {
			t.Fatalf("delete: %d", r.Status)
		}
		if len(b.sched.Scheduled()) != 0 {
			t.Fatalf("still scheduled after delete")
		}
	})
}

func TestScheduleInTimezone(t *testing.T) {
	b := setup(t, dbtest.Open(t, database.SQLite), setupOpts{})
	// In March 2031 Paris is UTC+1: start0 (10:00:30 UTC) is 11:00:30 there, so 11:01 Paris
	// is the next minute boundary in UTC.
	b.create(t, map[string]any{"agent_id": "greeter", "kind": "schedule", "version": "1", "config": map[string]any{"cron": "1 11 * * *", "timezone": "Europe/Paris"}})
	advanceTo(t, b.clock, 1, minute(1))
	eventually(t, "firing at 11:01 Paris", func() bool { return len(b.runs.all()) == 1 })
	assertTimes(t, b.runs.times(), time.Date(2031, 3, 4, 10, 1, 0, 0, time.UTC))
	if in := string(b.runs.all()[0].Input); in != `{}` {
		t.Fatalf("default input: %s", in)
	}
}

// TestNoBackfillAfterRestart: windows that pass while the scheduler is stopped are not
// fired when it starts again.
func TestNoBackfillAfterRestart(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		b.create(t, scheduleBody("* * * * *", nil))
		advanceTo(t, b.clock, 1, minute(1))
		eventually(t, "first firing", func() bool { return len(b.runs.all()) == 1 })
		if err := b.sched.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(minute(10).Add(20 * time.Second).Sub(b.clock.Now())) // down for 9 windows
		if err := b.sched.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		advanceTo(t, b.clock, 1, minute(11))
		eventually(t, "firing after restart", func() bool { return len(b.runs.all()) == 2 })
		assertTimes(t, b.runs.times(), minute(1), minute(11))
	})
}

// TestStaleReplicaCannotFire: two schedulers that both run jobs (no elector) fire each
// window once, and a replica that has not yet seen a change made through the other one
// cannot fire the old definition.
func TestStaleReplicaCannotFire(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		clock := clockwork.NewFakeClockAt(start0)
		a := setup(t, db, setupOpts{clock: clock})
		b := setup(t, db, setupOpts{clock: clock})
		tr := a.create(t, scheduleBody("* * * * *", nil))
		if err := b.sched.Sync(context.Background()); err != nil { // b's poll
			t.Fatal(err)
		}
		total := func() int { return len(a.runs.all()) + len(b.runs.all()) }
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("a runs %v\nb runs %v\na logs:\n%s\nb logs:\n%s", a.runs.times(), b.runs.times(), a.logs.String(), b.logs.String())
			}
		})
		for i := 1; i <= 3; i++ {
			advanceTo(t, clock, 2, minute(i))
			eventually(t, "both replicas handled the window", func() bool {
				return total() == i && strings.Count(a.logs.String()+b.logs.String(), "schedule window not claimed") == i
			})
		}
		// Disabled through a: b still has the job but its firing is refused by the claim.
		if r := a.srv.Do("PATCH", "/triggers/"+tr.ID, `{"enabled":false}`); r.Status != 200 {
			t.Fatal(r.Status)
		}
		advanceTo(t, clock, 1, minute(4))
		eventually(t, "stale replica fired", func() bool {
			return strings.Count(b.logs.String(), "schedule window not claimed") >= 1 && strings.Count(a.logs.String()+b.logs.String(), "schedule window not claimed") == 4
		})
		if total() != 3 {
			t.Fatalf("a disabled trigger started a run from a stale replica: %d runs", total())
		}
		if err := b.sched.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(b.sched.Scheduled()) != 0 {
			t.Fatal("the poll did not remove the disabled trigger")
		}
	})
}

// TestTwoReplicasOnPostgres: two control planes on one PostgreSQL schema, each with its
// own advisory-lock elector: every window starts exactly one run, also across a leader
// whose lock connection dies.
func TestTwoReplicasOnPostgres(t *testing.T) {
	url := dbtest.URL(t)
	open := func() *database.DB {
		db, err := database.Open(context.Background(), url, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return db
	}
	db1, db2 := open(), open()
	electors := map[*database.DB]*AdvisoryElector{}
	newElector := func(db *database.DB) *AdvisoryElector {
		key, err := LockKey(context.Background(), db.SQL())
		if err != nil {
			t.Fatal(err)
		}
		e := NewAdvisoryElector(db.SQL(), key)
		electors[db] = e
		return e
	}
	clock := clockwork.NewFakeClockAt(start0)
	a := setup(t, db1, setupOpts{clock: clock, elector: newElector})
	b := setup(t, db2, setupOpts{clock: clock, elector: newElector})
	a.create(t, scheduleBody("* * * * *", nil))
	if err := b.sched.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	times := func() []time.Time { return append(a.runs.times(), b.runs.times()...) }
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("a runs %v\nb runs %v\na logs:\n%s\nb logs:\n%s", a.runs.times(), b.runs.times(), a.logs.String(), b.logs.String())
		}
	})
	for i := 1; i <= 3; i++ {
		advanceTo(t, clock, 2, minute(i))
		eventually(t, "window fired", func() bool { return len(times()) >= i })
	}
	ea, eb := electors[db1], electors[db2]
	if ea.Leading() == eb.Leading() {
		t.Fatalf("leaders: a=%v b=%v", ea.Leading(), eb.Leading())
	}
	follower, leaderDB := b, db1
	if eb.Leading() {
		follower, leaderDB = a, db2
	}
	if len(follower.runs.all()) != 0 {
		t.Fatalf("the follower started runs")
	}
	// The leader's lock session dies: the lock goes with it and a replica takes over.
	key, _ := LockKey(context.Background(), leaderDB.SQL())
	res := db1.Exec(`SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid::bigint = ? AND objid::bigint = ? AND objsubid = 1`, uint32(uint64(key)>>32), uint32(uint64(key)))
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	// Wait for the server to drop the lock with the session (no window is in flight: the
	// fake clock is not moving), so that the next window finds it free.
	eventually(t, "the dead session's lock released", func() bool {
		var n int64
		db1.Raw(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid::bigint = ? AND objid::bigint = ? AND objsubid = 1`,
			uint32(uint64(key)>>32), uint32(uint64(key))).Scan(&n)
		return n == 0
	})
	for i := 4; i <= 7; i++ {
		advanceTo(t, clock, 2, minute(i))
		eventually(t, "window fired after the leader's session died", func() bool { return len(times()) >= i })
	}
	got := times()
	seen := map[time.Time]int{}
	for _, at := range got {
		seen[at]++
	}
	for w, n := range seen {
		if n != 1 {
			t.Fatalf("window %v fired %d times (all: %v)", w, n, got)
		}
	}
	for i := 1; i <= 7; i++ {
		if seen[minute(i)] != 1 {
			t.Fatalf("window %d did not fire: %v", i, got)
		}
	}
	if ea.Leading() == eb.Leading() {
		t.Fatalf("after failover: a=%v b=%v", ea.Leading(), eb.Leading())
	}
}

func TestAdvisoryElector(t *testing.T) {
	url := dbtest.URL(t)
	open := func() *database.DB {
		db, err := database.Open(context.Background(), url, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	db1, db2 := open(), open()
	ctx := context.Background()
	k1, err := LockKey(ctx, db1.SQL())
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := LockKey(ctx, db2.SQL())
	if k1 != k2 {
		t.Fatal("same schema, different keys")
	}
	a, b := NewAdvisoryElector(db1.SQL(), k1), NewAdvisoryElector(db2.SQL(), k2)
	if err := a.IsLeader(ctx); err != nil {
		t.Fatalf("a: %v", err)
	}
	if err := a.IsLeader(ctx); err != nil {
		t.Fatalf("a again: %v", err)
	}
	if err := b.IsLeader(ctx); !errors.Is(err, errNotLeader) {
		t.Fatalf("b: %v", err)
	}
	a.Release(ctx)
	if err := b.IsLeader(ctx); err != nil {
		t.Fatalf("b after release: %v", err)
	}
	if err := a.IsLeader(ctx); !errors.Is(err, errNotLeader) {
		t.Fatalf("a after b took over: %v", err)
	}
	// b's session dies: a takes over once the server has dropped it; b notices it lost.
	var pid int
	if err := db1.Raw(`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid::bigint = ? AND objid::bigint = ? AND objsubid = 1`,
		uint32(uint64(k1)>>32), uint32(uint64(k1))).Scan(&pid).Error; err != nil || pid == 0 {
		t.Fatalf("lock holder: %d %v", pid, err)
	}
	if err := db1.Exec("SELECT pg_terminate_backend(?)", pid).Error; err != nil {
		t.Fatal(err)
	}
	eventually(t, "a takes over", func() bool { return a.IsLeader(ctx) == nil })
	if err := b.IsLeader(ctx); !errors.Is(err, errNotLeader) {
		t.Fatalf("b after its session died: %v", err)
	}
	if b.Leading() {
		t.Fatal("b still thinks it leads")
	}
	// A different schema is a different leader.
	db3, err := database.Open(ctx, dbtest.URL(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	k3, err := LockKey(ctx, db3.SQL())
	if err != nil || k3 == k1 {
		t.Fatalf("other schema key: %d %v", k3, err)
	}
	other := NewAdvisoryElector(db3.SQL(), k3)
	if err := other.IsLeader(ctx); err != nil {
		t.Fatalf("other schema: %v", err)
	}
	other.Release(ctx)
}

func TestWindow(t *testing.T) {
	sc, err := parseSchedule(json.RawMessage(`{"cron":"*/15 * * * *"}`), start0)
	if err != nil {
		t.Fatal(err)
	}
	at := func(h, m, s int) time.Time { return time.Date(2031, 1, 1, h, m, s, 0, time.UTC) }
	for _, c := range []struct {
		now  time.Time
		want time.Time
		ok   bool
	}{
		{at(10, 15, 0), at(10, 15, 0), true},
		{at(10, 15, 59), at(10, 15, 0), true},
		{at(10, 29, 59), time.Time{}, false}, // more than a minute late
		{at(10, 0, 0), at(10, 0, 0), true},
	} {
		w, ok := window(sc.spec, c.now, time.Minute)
		if ok != c.ok || !w.Equal(c.want) {
			t.Errorf("window(%v) = %v %v, want %v %v", c.now, w, ok, c.want, c.ok)
		}
	}
}

// FuzzParseSchedule: any config either is refused with a named 400 or is accepted and then
// also accepted by gocron (what is validated is what gets scheduled).
func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{`{"cron":"* * * * *"}`, `{"cron":"0 0 31 2 *"}`, `{"cron":"@hourly","timezone":"Asia/Tokyo"}`,
		`{"cron":"*/5 1-3 * JAN MON"}`, `{"cron":"@every 1s"}`, `{"cron":"0 0 29 2 *","input":[1]}`, `{}`, `null`, `{"cron":"TZ=X * * * *"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		sc, err := parseSchedule(raw, start0)
		if err != nil {
			if e := apperr.From(err); e == nil || e.Status != 400 {
				t.Fatalf("%q: %v", raw, err)
			}
			return
		}
		if sc.spec.Next(start0).IsZero() {
			t.Fatalf("%q accepted but never fires", raw)
		}
		if err := gocron.NewDefaultCron(false).IsValid(sc.crontab(), time.UTC, start0); err != nil {
			t.Fatalf("%q accepted but gocron refuses %q: %v", raw, sc.crontab(), err)
		}
	})
}

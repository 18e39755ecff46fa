package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
)

// clock is a settable clock shared by the lease stores of one test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func leaseFixture(t *testing.T, db *database.DB) (*Store, *clock, func(owner string) *leaseStore) {
	t.Helper()
	st, err := NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Now().UTC()}
	st.now = c.now
	return st, c, func(owner string) *leaseStore {
		return &leaseStore{db: db, owner: owner, ttl: 30 * time.Second, now: c.now}
	}
}

func insertDurable(t *testing.T, st *Store) string {
	t.Helper()
	r, err := st.Insert(context.Background(), NewRun{Kind: KindAgent, Input: map[string]any{}, AgentID: "a", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func TestLeaseClaimRenewAndTakeover(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		st, clk, lease := leaseFixture(t, db)
		a, b := lease("A"), lease("B")
		id := insertDurable(t, st)
		// A non-durable run is never claimable.
		if _, err := st.Insert(ctx, NewRun{Kind: KindAgent, AgentID: "a"}); err != nil {
			t.Fatal(err)
		}

		ids, err := a.claimable(ctx, 10)
		if err != nil || len(ids) != 1 || ids[0] != id {
			t.Fatalf("claimable = %v, %v; want [%s]", ids, err, id)
		}
		// Racing claims: exactly one wins.
		var wins atomic.Int32
		var wg sync.WaitGroup
		for _, l := range []*leaseStore{a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, won, err := l.claim(ctx, id); err != nil {
					t.Error(err)
				} else if won {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d claims won, want 1", wins.Load())
		}
		r, _ := st.Get(ctx, id)
		if r.Status != StatusStreaming {
			t.Fatalf("claimed run status %q", r.Status)
		}
		var holder, other *leaseStore
		var hr row
		db.Where("id = ?", id).Take(&hr)
		if *hr.LeaseOwner == "A" {
			holder, other = a, b
		} else {
			holder, other = b, a
		}
		if ids, _ := a.claimable(ctx, 10); len(ids) != 0 {
			t.Fatalf("a held run is claimable: %v", ids)
		}
		if err := holder.save(ctx, id, "n1", runtime.NodeResult{Status: runtime.NodeOK, Ports: map[string]any{"out": 1.0}}); err != nil {
			t.Fatal(err)
		}
		if err := other.save(ctx, id, "n2", runtime.NodeResult{Status: runtime.NodeOK}); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("non-holder save: %v, want lease_lost", err)
		}
		// Renewal keeps it; then the holder goes silent past the lease and the other takes over.
		clk.add(20 * time.Second)
		if _, won, err := holder.renew(ctx, id); err != nil || !won {
			t.Fatalf("renew: %v %v", won, err)
		}
		clk.add(20 * time.Second)
		if _, won, _ := other.claim(ctx, id); won {
			t.Fatal("claimed a renewed lease")
		}
		clk.add(11 * time.Second)
		if _, won, err := other.claim(ctx, id); err != nil || !won {
			t.Fatalf("takeover after expiry: %v %v", won, err)
		}
		// The old holder is fenced off: no save, no renewal, no end, no park.
		if err := holder.save(ctx, id, "n3", runtime.NodeResult{Status: runtime.NodeOK}); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("stale save: %v", err)
		}
		if _, won, _ := holder.renew(ctx, id); won {
			t.Fatal("stale renew won")
		}
		if ok, _ := holder.finish(ctx, id, RunOutcome{Status: StatusCompleted}); ok {
			t.Fatal("stale finish won")
		}
		if ok, _ := holder.park(ctx, id, "h", "p", ""); ok {
			t.Fatal("stale park won")
		}
		cps, err := other.checkpoints(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(cps) != 1 || cps["n1"].Ports["out"] != 1.0 {
			t.Fatalf("checkpoints = %+v, want only n1", cps)
		}
		// The new holder ends the run; it is no longer claimable.
		if ok, err := other.finish(ctx, id, RunOutcome{Status: StatusCompleted, Output: map[string]any{"x": 1}}); err != nil || !ok {
			t.Fatalf("finish: %v %v", ok, err)
		}
		clk.add(time.Hour)
		if ids, _ := a.claimable(ctx, 10); len(ids) != 0 {
			t.Fatalf("finished run claimable: %v", ids)
		}
		r, _ = st.Get(ctx, id)
		if r.Status != StatusCompleted || string(r.Output) != `{"x":1}` {
			t.Fatalf("finished run: %+v", r)
		}
	})
}

func TestLeaseReleaseAndRetryDelay(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		st, clk, lease := leaseFixture(t, db)
		a, b := lease("A"), lease("B")
		id := insertDurable(t, st)
		if _, won, _ := a.claim(ctx, id); !won {
			t.Fatal("claim")
		}
		if err := a.release(ctx, id, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, won, _ := b.claim(ctx, id); !won {
			t.Fatal("a released run must be claimable at once")
		}
		if err := b.release(ctx, id, clk.now().Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, won, _ := a.claim(ctx, id); won {
			t.Fatal("claimed before the retry time")
		}
		clk.add(11 * time.Second)
		if _, won, _ := a.claim(ctx, id); !won {
			t.Fatal("not claimable after the retry time")
		}
	})
}

func TestResumeRace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		st, _, lease := leaseFixture(t, db)
		a := lease("A")
		id := insertDurable(t, st)
		if _, err := a.resume(ctx, id, "x"); !errors.Is(err, ErrRunNotWaiting) {
			t.Fatalf("resume of a created run: %v", err)
		}
		if _, err := a.resume(ctx, "run_missing", "x"); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("resume of an unknown run: %v", err)
		}
		if _, won, _ := a.claim(ctx, id); !won {
			t.Fatal("claim")
		}
		if ok, err := a.park(ctx, id, "approve", "Ship it?", ""); err != nil || !ok {
			t.Fatalf("park: %v %v", ok, err)
		}
		r, _ := st.Get(ctx, id)
		if r.Status != StatusWaiting || deref(r.AwaitingNode) != "approve" || deref(r.Prompt) != "Ship it?" {
			t.Fatalf("parked run: %+v", r)
		}
		if ids, _ := a.claimable(ctx, 10); len(ids) != 0 {
			t.Fatalf("a waiting run is claimable: %v", ids)
		}
		const racers = 8
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := lease("R").resume(ctx, id, map[string]any{"by": float64(i)})
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, ErrRunNotWaiting):
					t.Errorf("losing resume: %v, want run_not_waiting", err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d resumes won, want exactly 1", wins.Load())
		}
		cps, _ := a.checkpoints(ctx, id)
		if res, ok := cps["approve"]; !ok || res.Status != runtime.NodeOK || res.Ports["out"] == nil {
			t.Fatalf("human checkpoint = %+v", cps)
		}
		r, _ = st.Get(ctx, id)
		if r.Status != StatusStreaming || r.AwaitingNode != nil || r.Prompt != nil {
			t.Fatalf("resumed run: %+v", r)
		}
		if ids, _ := a.claimable(ctx, 10); len(ids) != 1 {
			t.Fatalf("a resumed run must be claimable: %v", ids)
		}
	})
}

// BenchmarkCheckpoint measures one node checkpoint: the lease-conditional progress update and
// the checkpoint insert in one transaction (what every settled node of a durable run costs).
func BenchmarkCheckpoint(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			db := dbtest.Open(b, dialect)
			st, err := NewStore(db)
			if err != nil {
				b.Fatal(err)
			}
			l := &leaseStore{db: db, owner: "bench", ttl: time.Hour, now: time.Now}
			ctx := context.Background()
			r, err := st.Insert(ctx, NewRun{Kind: KindAgent, AgentID: "a", Durable: true})
			if err != nil {
				b.Fatal(err)
			}
			if _, won, err := l.claim(ctx, r.ID); err != nil || !won {
				b.Fatal("claim", err)
			}
			res := runtime.NodeResult{Status: runtime.NodeOK, Ports: map[string]any{"out": map[string]any{"status": 200, "body": map[string]any{"text": "a typical small tool result"}}}}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if err := l.save(ctx, r.ID, fmt.Sprintf("n%d", i), res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDurableChain runs a 20-node transform chain through the executor with the
// database checkpoint store (and, for comparison, without a store): the difference per node
// is what durability adds to a node.
func BenchmarkDurableChain(b *testing.B) {
	const nodes = 20
	var sb strings.Builder
	sb.WriteString(`{"nodes":[`)
	for i := range nodes {
		fmt.Fprintf(&sb, `{"id":"t%d","kind":"transform","expr":"$in.in + 1"},`, i)
	}
	sb.WriteString(`{"id":"o","kind":"output"}],"edges":[`)
	for i := 1; i < nodes; i++ {
		fmt.Fprintf(&sb, `{"source":"t%d","target":"t%d"},`, i-1, i)
	}
	fmt.Fprintf(&sb, `{"source":"t%d","target":"o"}]}`, nodes-1)
	g, problems := graph.Validate(json.RawMessage(sb.String()))
	if len(problems) > 0 {
		b.Fatal(problems)
	}
	exec := runtime.New(runtime.Deps{})
	ctx := context.Background()
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
			if res := exec.Run(ctx, runtime.Spec{RunID: "r", Graph: g, Input: 0}); res.Status != runtime.StatusCompleted {
				b.Fatal(res)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(nodes+1)), "ns/node")
	})
	for _, dialect := range dbtest.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			db := dbtest.Open(b, dialect)
			st, err := NewStore(db)
			if err != nil {
				b.Fatal(err)
			}
			l := &leaseStore{db: db, owner: "bench", ttl: time.Hour, now: time.Now}
			for b.Loop() {
				r, err := st.Insert(ctx, NewRun{Kind: KindAgent, AgentID: "a", Durable: true})
				if err != nil {
					b.Fatal(err)
				}
				if _, won, err := l.claim(ctx, r.ID); err != nil || !won {
					b.Fatal("claim", err)
				}
				cp := &runCheckpoints{l: l, runID: r.ID, lost: func(error) {}}
				if res := exec.Run(ctx, runtime.Spec{RunID: r.ID, Graph: g, Input: 0, Store: cp}); res.Status != runtime.StatusCompleted {
					b.Fatal(res)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(nodes+1)), "ns/node")
		})
	}
}

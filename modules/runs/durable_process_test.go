package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/runs"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

// gatedEffects counts tool requests per path. Until opened, a request blocks when its path
// is in blockFirst (first request only) or when more than blockAfter requests came before it;
// blocked requests end when the caller goes away (a killed process) or the gate opens.
type gatedEffects struct {
	*httptest.Server
	mu         sync.Mutex
	hits       map[string]int
	total      int
	blocked    int
	blockFirst map[string]bool
	blockAfter int // 0 = no limit
	open       chan struct{}
}

func newGatedEffects(t *testing.T, blockFirst []string, blockAfter int) *gatedEffects {
	g := &gatedEffects{hits: map[string]int{}, blockFirst: map[string]bool{}, blockAfter: blockAfter, open: make(chan struct{})}
	for _, p := range blockFirst {
		g.blockFirst[p] = true
	}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.hits[r.URL.Path]++
		g.total++
		block := (g.blockFirst[r.URL.Path] && g.hits[r.URL.Path] == 1) || (g.blockAfter > 0 && g.total > g.blockAfter)
		select {
		case <-g.open:
			block = false
		default:
		}
		if block {
			g.blocked++
		}
		g.mu.Unlock()
		if block {
			defer func() { g.mu.Lock(); g.blocked--; g.mu.Unlock() }()
			select {
			case <-g.open:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}))
	t.Cleanup(func() { g.release(); g.Close() })
	return g
}

func (g *gatedEffects) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gatedEffects) count(p string) int { g.mu.Lock(); defer g.mu.Unlock(); return g.hits[p] }

func (g *gatedEffects) blockedNow() int { g.mu.Lock(); defer g.mu.Unlock(); return g.blocked }

// waitFor polls cond until it holds (or fails the test after a generous deadline).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// controlPlane is a real svc process (serve all) in durable mode with a short lease.
type controlPlane struct {
	proc *testkit.Proc
	base string
}

// plane starts svc serve all on the database (dataDir for SQLite, dbURL for PostgreSQL).
func plane(t *testing.T, dataDir, dbURL string) *controlPlane {
	t.Helper()
	ctl, inf := testkit.FreeAddr(t), testkit.FreeAddr(t)
	env := []string{
		"SERVICE_DATA_DIR=" + dataDir, "SERVICE_DATABASE_URL=" + dbURL,
		"SERVICE_CONTROL_ADDR=" + ctl, "SERVICE_INFERENCE_ADDR=" + inf, "SERVICE_INFERENCE_URL=http://" + inf,
		"SERVICE_DURABLE=1", "SERVICE_DURABLE_LEASE=1s", "SERVICE_LOG_LEVEL=warn", "SERVICE_LOG_FORMAT=json",
	}
	p := testkit.Start(t, env, "serve", "all")
	base := "http://" + ctl
	p.WaitHTTP(t, base+"/runs?limit=1", 200, 60*time.Second)
	return &controlPlane{proc: p, base: base}
}

func (c *controlPlane) do(t *testing.T, method, path string, body any) *testkit.Response {
	t.Helper()
	return testkit.Do(t, c.base, method, path, body)
}

func (c *controlPlane) publish(t *testing.T, ir string) {
	t.Helper()
	if r := c.do(t, "POST", "/agents", map[string]any{"ir": json.RawMessage(ir)}); r.Status != 201 {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
}

func (c *controlPlane) start(t *testing.T, agent string, input any) string {
	t.Helper()
	r := c.do(t, "POST", "/agents/"+agent+"/durable-runs", map[string]any{"input": input})
	if r.Status != 202 {
		t.Fatalf("durable-runs: %d %s", r.Status, r.Body)
	}
	return r.Map(t)["run_id"].(string)
}

func (c *controlPlane) wait(t *testing.T, id string, statuses ...string) map[string]any {
	t.Helper()
	var last map[string]any
	waitFor(t, "run "+id+" to reach "+strings.Join(statuses, "/"), func() bool {
		r := c.do(t, "GET", "/runs/"+id, nil)
		if r.Status != 200 {
			t.Fatalf("get run: %d %s", r.Status, r.Body)
		}
		last = r.Map(t)
		for _, s := range statuses {
			if last["status"] == s {
				return true
			}
		}
		return false
	})
	return last
}

// processDatabases yields, per dialect, the settings of a fresh database for svc processes
// and a handle on it for the test.
func processDatabases(t *testing.T, fn func(t *testing.T, dataDir, dbURL string, db *database.DB)) {
	for _, d := range dbtest.Dialects() {
		t.Run(d, func(t *testing.T) {
			dataDir := t.TempDir()
			var dbURL string
			var db *database.DB
			var err error
			if d == database.Postgres {
				dbURL = dbtest.URL(t)
				db, err = database.Open(context.Background(), dbURL, "")
			} else {
				db, err = database.Open(context.Background(), "", filepath.Join(dataDir, "svc.db"))
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			fn(t, dataDir, dbURL, db)
		})
	}
}

// TestDurableSurvivesKill kills -9 a control plane while a tool node is blocked, restarts
// it, and checks that the run continues from its checkpoints: nodes that finished before the
// kill hit their side effect once, the in-flight node runs again, and the human pause that
// follows survives another kill -9.
func TestDurableSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	processDatabases(t, func(t *testing.T, dataDir, dbURL string, db *database.DB) {
		fx := newGatedEffects(t, []string{"/b"}, 0)
		p1 := plane(t, dataDir, dbURL)
		p1.publish(t, `{"id":"pipeline","nodes":[`+tool("a", fx.URL+"/a")+`,`+tool("b", fx.URL+"/b")+`,`+
			`{"id":"ok","kind":"human","prompt":"Publish $in.in.body.path?"},`+tool("c", fx.URL+"/c")+`,`+
			`{"id":"o","kind":"output","value":{"decision":"$in.d","last":"$in.in.body.path"}}],`+
			`"edges":[{"source":"a","target":"b"},{"source":"b","target":"ok"},{"source":"ok","target":"c"},`+
			`{"source":"ok","target":"o","targetPort":"d"},{"source":"c","target":"o"}]}`)
		id := p1.start(t, "pipeline", map[string]any{})
		waitFor(t, "node b to block", func() bool { return fx.blockedNow() == 1 })
		p1.proc.Kill()

		p2 := plane(t, dataDir, dbURL)
		run := p2.wait(t, id, runs.StatusWaiting, runs.StatusCompleted, runs.StatusFailed)
		if run["status"] != runs.StatusWaiting || run["awaiting_node"] != "ok" || run["prompt"] != "Publish /b?" {
			t.Fatalf("after the first restart: %v", run)
		}
		p2.proc.Kill()

		p3 := plane(t, dataDir, dbURL)
		run = p3.wait(t, id, runs.StatusWaiting, runs.StatusCompleted, runs.StatusFailed)
		if run["status"] != runs.StatusWaiting {
			t.Fatalf("a waiting run did not survive a kill: %v", run)
		}
		if r := p3.do(t, "POST", "/runs/"+id+"/resume", map[string]any{"input": "yes"}); r.Status != 202 {
			t.Fatalf("resume: %d %s", r.Status, r.Body)
		}
		run = p3.wait(t, id, runs.StatusCompleted, runs.StatusFailed)
		out, _ := json.Marshal(run["output"])
		if run["status"] != runs.StatusCompleted || string(out) != `{"decision":"yes","last":"/c"}` {
			t.Fatalf("final run: %v (output %s)", run, out)
		}
		if a, b, c := fx.count("/a"), fx.count("/b"), fx.count("/c"); a != 1 || b != 2 || c != 1 {
			t.Fatalf("side effects a=%d b=%d c=%d; want a=1 (checkpointed before the kill), b=2 (in flight: at-least-once), c=1", a, b, c)
		}
	})
}

// TestDurableMapSurvivesKill kills a process halfway through a map of 100 elements: after a
// restart the map finishes without redoing the elements checkpointed before the kill.
func TestDurableMapSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	processDatabases(t, func(t *testing.T, dataDir, dbURL string, db *database.DB) {
		const n, half, conc = 100, 50, 4
		fx := newGatedEffects(t, nil, half)
		p1 := plane(t, dataDir, dbURL)
		p1.publish(t, fmt.Sprintf(`{"id":"fanout","nodes":[{"id":"each","kind":"map","over":"$in.in.items","concurrency":%d,"body":{"nodes":[
			{"id":"hit","kind":"tool","tool":{"type":"http","method":"POST","url":"%s/item/$in.in"}},
			{"id":"res","kind":"output","value":"$in.in.body.path"}],"edges":[{"source":"hit","target":"res"}]}},
			{"id":"o","kind":"output"}],"edges":[{"source":"each","target":"o"}]}`, conc, fx.URL))
		items := make([]int, n)
		for i := range items {
			items[i] = i
		}
		id := p1.start(t, "fanout", map[string]any{"items": items})
		element := regexp.MustCompile(`^each\[(\d+)\]$`)
		done := func() map[string]bool {
			var keys []string
			if err := db.Table("run_checkpoints").Where("run_id = ?", id).Pluck("node_key", &keys).Error; err != nil {
				t.Fatal(err)
			}
			out := map[string]bool{}
			for _, k := range keys {
				if m := element.FindStringSubmatch(k); m != nil {
					out["/item/"+m[1]] = true
				}
			}
			return out
		}
		waitFor(t, "the map to stall halfway", func() bool { return fx.blockedNow() == conc && len(done()) == half })
		before := done()
		p1.proc.Kill()
		fx.release()

		p2 := plane(t, dataDir, dbURL)
		run := p2.wait(t, id, runs.StatusCompleted, runs.StatusFailed)
		list, _ := run["output"].([]any)
		if run["status"] != runs.StatusCompleted || len(list) != n || list[n-1] != fmt.Sprintf("/item/%d", n-1) {
			t.Fatalf("run = %v", run)
		}
		redone := 0
		for i := range n {
			p := fmt.Sprintf("/item/%d", i)
			c := fx.count(p)
			switch {
			case before[p] && c != 1:
				t.Fatalf("element %d was checkpointed before the kill but hit %d times", i, c)
			case c < 1 || c > 2:
				t.Fatalf("element %d hit %d times", i, c)
			case c == 2:
				redone++
			}
		}
		if redone > conc {
			t.Fatalf("%d elements ran twice; only the %d in flight may", redone, conc)
		}
	})
}

// TestDurableTwoProcesses runs two control planes on one PostgreSQL sharing N durable runs:
// every node executes exactly once.
func TestDurableTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dbURL := dbtest.URL(t) // skips without PostgreSQL
	fx := newSideEffects(t)
	a, b := plane(t, t.TempDir(), dbURL), plane(t, t.TempDir(), dbURL)
	a.publish(t, `{"id":"chain","nodes":[`+
		tool("one", fx.URL+"/$in.in.n/one")+`,`+tool("two", fx.URL+"/$in.in.body.id/two")+`,`+tool("three", fx.URL+"/$in.in.body.id/three")+`,`+
		`{"id":"o","kind":"output","value":"$in.in.body.path"}],`+
		`"edges":[{"source":"one","target":"two"},{"source":"two","target":"three"},{"source":"three","target":"o"}]}`)
	const n = 30
	ids := make([]string, n)
	for i := range n {
		p := a
		if i%2 == 1 {
			p = b
		}
		ids[i] = p.start(t, "chain", map[string]any{"n": i})
	}
	for i, id := range ids {
		run := a.wait(t, id, runs.StatusCompleted, runs.StatusFailed)
		if want := fmt.Sprintf("/__%d_one_two/three", i); run["output"] != want {
			t.Fatalf("run %d = %v, want output %s", i, run, want)
		}
	}
	hits := fx.snapshot()
	if len(hits) != 3*n {
		t.Fatalf("%d distinct node executions, want %d", len(hits), 3*n)
	}
	for p, c := range hits {
		if c != 1 {
			t.Fatalf("%s executed %d times", p, c)
		}
	}
}

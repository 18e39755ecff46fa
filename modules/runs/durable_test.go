package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/modules/runs"
	"github.com/svc-dev/svc/modules/sessions"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/httpx"
	"github.com/svc-dev/svc/platform/testkit"
)

// sideEffects is a local HTTP server that counts requests per path: the observable side
// effects of tool nodes. Paths under /block/ wait until released (or the client goes away).
type sideEffects struct {
	*httptest.Server
	mu      sync.Mutex
	hits    map[string]int
	release chan struct{}
	blocked chan string
	gone    atomic.Int32 // blocked requests whose caller went away
}

func newSideEffects(t *testing.T) *sideEffects {
	s := &sideEffects{hits: map[string]int{}, release: make(chan struct{}), blocked: make(chan string, 64)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/block/") {
			s.blocked <- r.URL.Path
			select {
			case <-s.release:
			case <-r.Context().Done():
				s.gone.Add(1)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q,"id":%q}`, r.URL.Path, strings.ReplaceAll(r.URL.Path, "/", "_"))
	}))
	t.Cleanup(func() {
		s.unblock()
		s.Close()
	})
	return s
}

func (s *sideEffects) unblock() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

func (s *sideEffects) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *sideEffects) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.hits))
	for k, v := range s.hits {
		out[k] = v
	}
	return out
}

// durableBundle is a control plane with the runs, sessions and durable modules.
type durableBundle struct {
	srv     *testkit.Server
	agents  *agentsFake
	svc     *runs.Service
	durable *runs.Durable
	obs     *recorder
	db      *database.DB
	fx      *sideEffects
}

type durableOpts struct {
	off   bool
	owner string
}

// setupDurable mounts durable mode on db. Several bundles may share one database (replicas);
// pass the first bundle's agents so that they resolve the same saved agents.
func setupDurable(t *testing.T, db *database.DB, fx *sideEffects, ag *agentsFake, o durableOpts) *durableBundle {
	t.Helper()
	if ag == nil {
		ag = &agentsFake{}
	}
	store, err := runs.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sessions.NewService(db)
	if err != nil {
		t.Fatal(err)
	}
	obs := &recorder{finished: map[string]runs.RunOutcome{}, events: map[string][]runtime.Event{}}
	exec := runtime.New(runtime.Deps{Agents: runs.SubgraphLoader(ag)})
	d, err := runs.NewDurable(runs.DurableOptions{
		DB: db, Store: store, Executor: exec, Agents: ag, Sessions: sessionsAdapter{ss}, Observers: []runs.Observer{obs},
		Enabled: !o.off, Lease: 2 * time.Second, Heartbeat: 200 * time.Millisecond, Poll: 50 * time.Millisecond,
		Owner: o.owner, Logger: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := runs.NewService(runs.Options{Store: store, Executor: exec, Agents: ag, Sessions: sessionsAdapter{ss},
		Observers: []runs.Observer{obs}, DurableMode: !o.off, Durable: d, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.Stop(context.Background())
		_ = svc.Stop(context.Background())
	})
	srv := testkit.New(t, testkit.Options{}, runs.New(svc, runs.ModuleOptions{}), d, sessions.New(ss))
	return &durableBundle{srv: srv, agents: ag, svc: svc, durable: d, obs: obs, db: db, fx: fx}
}

// waitStatus polls GET /runs/{id} until the run has one of the statuses.
func waitStatus(t *testing.T, srv *testkit.Server, id string, statuses ...string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last map[string]any
	for time.Now().Before(deadline) {
		r := srv.Do("GET", "/runs/"+id, nil)
		if r.Status != 200 {
			t.Fatalf("get run: %d %s", r.Status, r.Body)
		}
		last = r.Map(t)
		for _, s := range statuses {
			if last["status"] == s {
				return last
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s never reached %v; last %v", id, statuses, last)
	return nil
}

func startDurable(t *testing.T, srv *testkit.Server, agent string, body any) string {
	t.Helper()
	r := srv.Do("POST", "/agents/"+agent+"/durable-runs", body)
	if r.Status != http.StatusAccepted {
		t.Fatalf("durable-runs: %d %s", r.Status, r.Body)
	}
	var v struct {
		RunID string `json:"run_id"`
	}
	r.JSON(t, &v)
	if v.RunID == "" {
		t.Fatalf("no run_id in %s", r.Body)
	}
	return v.RunID
}

func tool(id, url string) string {
	return fmt.Sprintf(`{"id":%q,"kind":"tool","tool":{"type":"http","method":"POST","url":%q}}`, id, url)
}

func TestDurableModeOff(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	b := setupDurable(t, db, nil, nil, durableOpts{off: true})
	b.agents.publish(t, "ask", "1", `{"nodes":[{"id":"h","kind":"human"},{"id":"o","kind":"output"}],"edges":[{"source":"h","target":"o"}]}`)
	for _, c := range []struct{ path string }{{"/agents/ask/durable-runs"}, {"/runs/run_x/resume"}} {
		r := b.srv.Do("POST", c.path, map[string]any{"input": map[string]any{}})
		if r.Status != 400 || r.ErrorCode() != "durable_required" {
			t.Fatalf("%s with durable mode off: %d %s", c.path, r.Status, r.Body)
		}
	}
	// The ordinary agent run endpoint refuses an agent that needs durable mode.
	r := b.srv.Do("POST", "/agents/ask/runs", map[string]any{"input": map[string]any{}, "stream": false})
	if r.Status != 400 || r.ErrorCode() != "durable_required" {
		t.Fatalf("agent run of a human agent: %d %s", r.Status, r.Body)
	}
	if n := countRuns(t, db); n != 0 {
		t.Fatalf("%d runs recorded by refused requests", n)
	}
}

func TestDurableHumanPauseResume(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		fx := newSideEffects(t)
		b := setupDurable(t, db, fx, nil, durableOpts{})
		b.agents.publish(t, "approve", "1", `{"nodes":[`+
			tool("draft", fx.URL+"/draft")+`,`+
			`{"id":"ask","kind":"human","prompt":"Send $in.in.body.path?"},`+
			`{"id":"o","kind":"output","value":{"answer":"$in.in.decision","draft":"$in.in.draft"}}],`+
			`"edges":[{"source":"draft","target":"ask"},{"source":"ask","target":"o"}]}`)

		// Bad requests change nothing.
		for _, c := range []struct {
			body any
			code string
		}{
			{map[string]any{"input": map[string]any{}, "stream": true}, "invalid_request"},
			{map[string]any{"input": map[string]any{}, "bogus": 1}, "invalid_request"},
			{`{"input":`, "invalid_request"},
		} {
			if r := b.srv.Do("POST", "/agents/approve/durable-runs", c.body); r.Status != 400 || r.ErrorCode() != c.code {
				t.Fatalf("bad body %v: %d %s", c.body, r.Status, r.Body)
			}
		}
		if r := b.srv.Do("POST", "/agents/nobody/durable-runs", map[string]any{}); r.Status != 404 {
			t.Fatalf("unknown agent: %d %s", r.Status, r.Body)
		}
		if n := countRuns(t, db); n != 0 {
			t.Fatalf("%d runs recorded by refused requests", n)
		}

		id := startDurable(t, b.srv, "approve", map[string]any{"input": map[string]any{"to": "bob"}})
		run := waitStatus(t, b.srv, id, runs.StatusWaiting, runs.StatusFailed, runs.StatusCompleted)
		if run["status"] != runs.StatusWaiting || run["awaiting_node"] != "ask" || run["prompt"] != "Send /draft?" || run["durable"] != true {
			t.Fatalf("parked run = %v", run)
		}
		if r := b.srv.Do("POST", "/runs/"+id+"/resume", map[string]any{}); r.Status != 400 || r.ErrorCode() != "invalid_request" {
			t.Fatalf("resume without input: %d %s", r.Status, r.Body)
		}
		if r := b.srv.Do("POST", "/runs/run_missing/resume", map[string]any{"input": 1}); r.Status != 404 {
			t.Fatalf("resume of an unknown run: %d %s", r.Status, r.Body)
		}
		if r := b.srv.Do("POST", "/runs/"+id+"/resume", map[string]any{"input": map[string]any{"decision": "yes", "draft": "$in.in.x"}}); r.Status != 202 {
			t.Fatalf("resume: %d %s", r.Status, r.Body)
		}
		run = waitStatus(t, b.srv, id, runs.StatusCompleted, runs.StatusFailed)
		out, _ := json.Marshal(run["output"])
		// The resume input is data, never a template: "$in.in.x" stays as typed.
		if run["status"] != runs.StatusCompleted || string(out) != `{"answer":"yes","draft":"$in.in.x"}` || run["awaiting_node"] != nil {
			t.Fatalf("resumed run = %v (output %s)", run, out)
		}
		if n := fx.count("/draft"); n != 1 {
			t.Fatalf("the node before the pause ran %d times, want 1", n)
		}
		if r := b.srv.Do("POST", "/runs/"+id+"/resume", map[string]any{"input": "again"}); r.Status != 409 || r.ErrorCode() != "run_not_waiting" {
			t.Fatalf("resume of a completed run: %d %s", r.Status, r.Body)
		}

		// Racing resumes over HTTP: exactly one wins.
		id2 := startDurable(t, b.srv, "approve", map[string]any{"input": map[string]any{}})
		waitStatus(t, b.srv, id2, runs.StatusWaiting)
		var wins, conflicts atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := testkit.Do(t, b.srv.URL, "POST", "/runs/"+id2+"/resume", map[string]any{"input": map[string]any{"decision": i, "draft": "d"}})
				switch {
				case r.Status == 202:
					wins.Add(1)
				case r.Status == 409 && r.ErrorCode() == "run_not_waiting":
					conflicts.Add(1)
				default:
					t.Errorf("racing resume: %d %s", r.Status, r.Body)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 || conflicts.Load() != 7 {
			t.Fatalf("racing resumes: %d won, %d conflicted; want 1 and 7", wins.Load(), conflicts.Load())
		}
		if run := waitStatus(t, b.srv, id2, runs.StatusCompleted, runs.StatusFailed); run["status"] != runs.StatusCompleted {
			t.Fatalf("raced run = %v", run)
		}
	})
}

// TestDurableHumanSurvivesRestart parks a run, stops its process's durable mode and resumes
// it through a fresh one (a new lease owner) on the same database.
func TestDurableHumanSurvivesRestart(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	fx := newSideEffects(t)
	first := setupDurable(t, db, fx, nil, durableOpts{owner: "first"})
	first.agents.publish(t, "approve", "1", `{"nodes":[`+tool("draft", fx.URL+"/draft")+`,{"id":"ask","kind":"human","prompt":"ok?"},{"id":"o","kind":"output"}],`+
		`"edges":[{"source":"draft","target":"ask"},{"source":"ask","target":"o"}]}`)
	id := startDurable(t, first.srv, "approve", map[string]any{"input": map[string]any{}})
	waitStatus(t, first.srv, id, runs.StatusWaiting)
	if err := first.durable.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := setupDurable(t, db, fx, first.agents, durableOpts{owner: "second"})
	if r := second.srv.Do("POST", "/runs/"+id+"/resume", map[string]any{"input": "approved"}); r.Status != 202 {
		t.Fatalf("resume: %d %s", r.Status, r.Body)
	}
	run := waitStatus(t, second.srv, id, runs.StatusCompleted, runs.StatusFailed)
	if run["status"] != runs.StatusCompleted || run["output"] != "approved" || fx.count("/draft") != 1 {
		t.Fatalf("run = %v, draft hits %d", run, fx.count("/draft"))
	}
}

func TestDurableComposites(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		fx := newSideEffects(t)
		b := setupDurable(t, db, fx, nil, durableOpts{})
		b.agents.publish(t, "double", "1", `{"nodes":[{"id":"t","kind":"transform","expr":"$in.in.n * 10"},{"id":"o","kind":"output"}],"edges":[{"source":"t","target":"o"}]}`)
		b.agents.publish(t, "double", "2", `{"nodes":[{"id":"t","kind":"transform","expr":"$in.in.n * 2"},{"id":"o","kind":"output"}],"edges":[{"source":"t","target":"o"}]}`)
		b.agents.publish(t, "combo", "1", `{"nodes":[
			{"id":"each","kind":"map","over":"$in.in.items","concurrency":3,"body":{"nodes":[
				{"id":"hit","kind":"tool","tool":{"type":"http","method":"POST","url":"`+fx.URL+`/item/$in.in"}},
				{"id":"res","kind":"output","value":"$in.in.body.path"}],
			 "edges":[{"source":"hit","target":"res"}]}},
			{"id":"count","kind":"loop","maxIterations":10,"until":"$in.in.n >= 3","body":{"nodes":[
				{"id":"inc","kind":"transform","expr":"{n: $in.in.n + 1}"},{"id":"res","kind":"output"}],
			 "edges":[{"source":"inc","target":"res"}]}},
			{"id":"sub","kind":"subgraph","agent":"double"},
			{"id":"pinned","kind":"subgraph","agent":"double","version":"1"},
			{"id":"o","kind":"output","value":{"paths":"$in.items","loop":"$in.loop.n","latest":"$in.sub","pinned":"$in.pinned"}}],
		 "edges":[{"source":"each","target":"o","targetPort":"items"},{"source":"count","target":"o","targetPort":"loop"},
			{"source":"count","target":"sub"},{"source":"count","target":"pinned"},
			{"source":"sub","target":"o","targetPort":"sub"},{"source":"pinned","target":"o","targetPort":"pinned"}]}`)
		items := make([]any, 10)
		for i := range items {
			items[i] = i
		}
		id := startDurable(t, b.srv, "combo", map[string]any{"input": map[string]any{"items": items, "n": 0}})
		run := waitStatus(t, b.srv, id, runs.StatusCompleted, runs.StatusFailed)
		out, _ := json.Marshal(run["output"])
		if run["status"] != runs.StatusCompleted {
			t.Fatalf("run = %v", run)
		}
		var got struct {
			Paths  []string `json:"paths"`
			Loop   float64  `json:"loop"`
			Latest float64  `json:"latest"`
			Pinned float64  `json:"pinned"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output %s: %v", out, err)
		}
		if len(got.Paths) != 10 || got.Paths[7] != "/item/7" || got.Loop != 3 || got.Latest != 6 || got.Pinned != 30 {
			t.Fatalf("output = %s", out)
		}
		for i := range 10 {
			if n := fx.count(fmt.Sprintf("/item/%d", i)); n != 1 {
				t.Fatalf("element %d hit %d times", i, n)
			}
		}
	})
}

// TestDurableTwoWorkers runs N durable runs with two workers (two lease owners, as two
// replicas would be) on one database: every node executes exactly once.
func TestDurableTwoWorkers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		fx := newSideEffects(t)
		a := setupDurable(t, db, fx, nil, durableOpts{owner: "A"})
		b := setupDurable(t, db, fx, a.agents, durableOpts{owner: "B"})
		a.agents.publish(t, "chain", "1", `{"nodes":[`+
			tool("one", fx.URL+"/$in.in.n/one")+`,`+tool("two", fx.URL+"/$in.in.body.id/two")+`,`+tool("three", fx.URL+"/$in.in.body.id/three")+`,`+
			`{"id":"o","kind":"output","value":"$in.in.body.path"}],`+
			`"edges":[{"source":"one","target":"two"},{"source":"two","target":"three"},{"source":"three","target":"o"}]}`)
		const n = 24
		ids := make([]string, n)
		for i := range n {
			srv := a.srv
			if i%2 == 1 {
				srv = b.srv
			}
			ids[i] = startDurable(t, srv, "chain", map[string]any{"input": map[string]any{"n": i}})
		}
		for i, id := range ids {
			run := waitStatus(t, a.srv, id, runs.StatusCompleted, runs.StatusFailed)
			if want := fmt.Sprintf("/__%d_one_two/three", i); run["output"] != want {
				t.Fatalf("run %d = %v, want output %s", i, run, want)
			}
		}
		hits := fx.snapshot()
		if len(hits) != 3*n {
			t.Fatalf("%d distinct node executions, want %d: %v", len(hits), 3*n, hits)
		}
		for p, c := range hits {
			if c != 1 {
				t.Fatalf("%s executed %d times", p, c)
			}
		}
	})
}

// TestTriggerStartsDurableRun: a background agent run (what triggers start) of an agent that
// needs durable mode becomes a durable run.
func TestTriggerStartsDurableRun(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	b := setupDurable(t, db, nil, nil, durableOpts{})
	b.agents.publish(t, "ask", "1", `{"nodes":[{"id":"h","kind":"human","prompt":"hi $in.in.who"},{"id":"o","kind":"output"}],"edges":[{"source":"h","target":"o"}]}`)
	id, err := b.svc.StartAgentRun(context.Background(), runs.AgentRunRequest{AgentID: "ask", Input: map[string]any{"who": "ann"}, TriggerID: "trg_1"})
	if err != nil {
		t.Fatal(err)
	}
	run := waitStatus(t, b.srv, id, runs.StatusWaiting)
	if run["durable"] != true || run["trigger_id"] != "trg_1" || run["prompt"] != "hi ann" {
		t.Fatalf("triggered run = %v", run)
	}
}

// TestDurableLeaseLostStopsExecution takes a run's lease away from the worker executing it
// (as a replica that claimed it after an expiry would): the worker stops without writing,
// and the node it was executing runs again under the next holder.
func TestDurableLeaseLostStopsExecution(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		fx := newSideEffects(t)
		b := setupDurable(t, db, fx, nil, durableOpts{owner: "A"})
		b.agents.publish(t, "steal", "1", `{"nodes":[`+tool("b", fx.URL+"/block/b")+`,`+tool("c", fx.URL+"/c")+`,{"id":"o","kind":"output","value":"$in.in.body.path"}],`+
			`"edges":[{"source":"b","target":"c"},{"source":"c","target":"o"}]}`)
		id := startDurable(t, b.srv, "steal", map[string]any{})
		<-fx.blocked
		far := time.Now().UTC().Add(time.Hour)
		if err := db.Exec("UPDATE runs SET lease_owner = ?, lease_until = ? WHERE id = ?", "thief", far, id).Error; err != nil {
			t.Fatal(err)
		}
		// The heartbeat notices and cancels the execution: the blocked tool call is abandoned.
		deadline := time.Now().Add(30 * time.Second)
		for fx.gone.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if fx.gone.Load() != 1 {
			t.Fatal("the execution went on after its lease was taken")
		}
		var n int64
		db.Table("run_checkpoints").Where("run_id = ?", id).Count(&n)
		if n != 0 || fx.count("/c") != 0 {
			t.Fatalf("a fenced-off worker wrote %d checkpoints and called c %d times", n, fx.count("/c"))
		}
		// The thief's lease expires without progress: the run is claimed again and completes.
		fx.unblock()
		if err := db.Exec("UPDATE runs SET lease_until = ? WHERE id = ?", time.Now().UTC().Add(-time.Second), id).Error; err != nil {
			t.Fatal(err)
		}
		run := waitStatus(t, b.srv, id, runs.StatusCompleted, runs.StatusFailed)
		if run["status"] != runs.StatusCompleted || run["output"] != "/c" || fx.count("/block/b") != 2 || fx.count("/c") != 1 {
			t.Fatalf("run = %v; b ran %d times, c %d", run, fx.count("/block/b"), fx.count("/c"))
		}
	})
}

// TestDurableSessionTurn: a durable run in a session appends its turn when it completes.
func TestDurableSessionTurn(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	b := setupDurable(t, db, nil, nil, durableOpts{})
	b.agents.publish(t, "ask", "1", `{"nodes":[{"id":"h","kind":"human","prompt":"?"},{"id":"o","kind":"output"}],"edges":[{"source":"h","target":"o"}]}`)
	if r := b.srv.Do("POST", "/sessions", map[string]any{"id": "s1"}); r.Status != 201 {
		t.Fatalf("session: %d %s", r.Status, r.Body)
	}
	if r := b.srv.Do("POST", "/agents/ask/durable-runs", map[string]any{"session_id": "nope"}); r.Status != 404 {
		t.Fatalf("unknown session: %d %s", r.Status, r.Body)
	}
	id := startDurable(t, b.srv, "ask", map[string]any{"input": "question", "session_id": "s1"})
	waitStatus(t, b.srv, id, runs.StatusWaiting)
	if r := b.srv.Do("POST", "/runs/"+id+"/resume", map[string]any{"input": "answer"}); r.Status != 202 {
		t.Fatalf("resume: %d %s", r.Status, r.Body)
	}
	if run := waitStatus(t, b.srv, id, runs.StatusCompleted, runs.StatusFailed); run["session_id"] != "s1" || run["output"] != "answer" {
		t.Fatalf("run = %v", run)
	}
	var sess struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	b.srv.Do("GET", "/sessions/s1", nil).JSON(t, &sess)
	if len(sess.Messages) != 2 || sess.Messages[0].Content != "question" || sess.Messages[1].Content != "answer" {
		t.Fatalf("session messages = %+v", sess.Messages)
	}
}

var _ httpx.Starter = (*runs.Durable)(nil)
var _ httpx.Module = (*runs.Durable)(nil)

package runs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/modules/runs"
	"github.com/svc-dev/svc/modules/sessions"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/client"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/httpx"
	"github.com/svc-dev/svc/platform/testkit"
)

// upstream is a scripted OpenAI-compatible server speaking the real streaming wire format.
// The provider model name picks the behaviour: "echo" answers "echo: <last user message>"
// in three chunks; "think" streams reasoning first; "slow" sends one chunk and then waits for
// release (or the client to go away).
type upstream struct {
	*httptest.Server
	release chan struct{}

	mu       sync.Mutex
	requests []map[string]any
	gone     int // streams whose client went away mid-answer
	started  chan struct{}
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{release: make(chan struct{}), started: make(chan struct{}, 16)}
	u.Server = httptest.NewServer(http.HandlerFunc(u.chat))
	t.Cleanup(func() {
		u.finish()
		u.Close()
	})
	return u
}

func (u *upstream) chat(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"unknown path","type":"invalid_request_error","code":"unknown_url"}}`, 404)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, 400)
		return
	}
	u.mu.Lock()
	u.requests = append(u.requests, body)
	u.mu.Unlock()
	model, _ := body["model"].(string)
	if model == "broken" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"upstream overloaded","type":"server_error","code":"upstream_overloaded"}}`)
		return
	}
	msgs, _ := body["messages"].([]any)
	last := ""
	if len(msgs) > 0 {
		last, _ = msgs[len(msgs)-1].(map[string]any)["content"].(string)
	}
	answer := "echo: " + last
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	send := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	if model == "think" {
		send(map[string]any{"role": "assistant", "reasoning_content": "pondering"}, nil)
	}
	third := len(answer) / 3
	send(map[string]any{"role": "assistant", "content": answer[:third]}, nil)
	if model == "slow" {
		u.started <- struct{}{}
		select {
		case <-u.release:
		case <-r.Context().Done():
			u.mu.Lock()
			u.gone++
			u.mu.Unlock()
			return
		}
	}
	send(map[string]any{"content": answer[third : 2*third]}, nil)
	send(map[string]any{"content": answer[2*third:]}, nil)
	send(map[string]any{}, "stop")
	b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model, "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}})
	fmt.Fprintf(w, "data: %s\n\n", b)
	io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// finish lets "slow" answers go on.
func (u *upstream) finish() {
	u.mu.Lock()
	defer u.mu.Unlock()
	select {
	case <-u.release:
	default:
		close(u.release)
	}
}

func (u *upstream) last() map[string]any {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.requests) == 0 {
		return nil
	}
	return u.requests[len(u.requests)-1]
}

func (u *upstream) goneCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.gone
}

// agentsFake is a registry of saved agents built from IR documents; it answers with the
// same codes as the agents module.
type agentsFake struct {
	mu       sync.Mutex
	versions map[string][]runs.AgentVersion // newest last
}

func (a *agentsFake) publish(t *testing.T, id, version, ir string) runs.AgentVersion {
	t.Helper()
	g, problems := graph.Validate(json.RawMessage(ir))
	if len(problems) > 0 {
		t.Fatalf("fixture %s: %v", id, problems)
	}
	h, err := graph.ContentHash(json.RawMessage(ir))
	if err != nil {
		t.Fatal(err)
	}
	av := runs.AgentVersion{AgentID: id, Version: version, ContentHash: h, Graph: g}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.versions == nil {
		a.versions = map[string][]runs.AgentVersion{}
	}
	a.versions[id] = append(a.versions[id], av)
	return av
}

func (a *agentsFake) Resolve(_ context.Context, id, version, hash string) (runs.AgentVersion, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	vs, ok := a.versions[id]
	if !ok {
		return runs.AgentVersion{}, apperr.NotFound("agent_not_found", "agent not found")
	}
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if (version == "" || v.Version == version) && (hash == "" || v.ContentHash == hash) {
			return v, nil
		}
	}
	return runs.AgentVersion{}, apperr.NotFound("version_not_found", "version not found")
}

// sessionsAdapter is the composition root's adapter, repeated here.
type sessionsAdapter struct{ s *sessions.Service }

func (a sessionsAdapter) Exists(ctx context.Context, id string) error { return a.s.Exists(ctx, id) }
func (a sessionsAdapter) Append(ctx context.Context, id, u, as string) error {
	return a.s.Append(ctx, id, u, as)
}
func (a sessionsAdapter) History(ctx context.Context, id string) ([]runs.HistoryMessage, error) {
	h, err := a.s.History(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]runs.HistoryMessage, len(h))
	for i, m := range h {
		out[i] = runs.HistoryMessage{Role: m.Role, Content: m.Content}
	}
	return out, nil
}

// recorder is an Observer that keeps what it saw.
type recorder struct {
	mu       sync.Mutex
	started  []runs.RunInfo
	finished map[string]runs.RunOutcome
	events   map[string][]runtime.Event
}

type recSink struct {
	r  *recorder
	id string
}

func (s recSink) Emit(e runtime.Event) {
	s.r.mu.Lock()
	s.r.events[s.id] = append(s.r.events[s.id], e)
	s.r.mu.Unlock()
}

func (r *recorder) RunStarted(_ context.Context, info runs.RunInfo) runtime.EventSink {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, info)
	return recSink{r: r, id: info.RunID}
}

func (r *recorder) RunFinished(_ context.Context, info runs.RunInfo, out runs.RunOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished[info.RunID] = out
}

// bundle is the control plane under test and its collaborators.
type bundle struct {
	srv      *testkit.Server
	up       *upstream
	agents   *agentsFake
	sessions *sessions.Service
	svc      *runs.Service
	obs      *recorder
	db       *database.DB
}

type setupOpts struct {
	token     string
	keepalive time.Duration
	durable   bool
	owner     string           // lease owner of the process (default: generated)
	now       func() time.Time // clock of leases (default: time.Now)
}

// setup builds the real stack: scripted upstream ← inference plane (data plane module) ←
// platform/client ← graph executor ← runs and sessions modules on a real database.
func setup(t *testing.T, db *database.DB, o setupOpts) *bundle {
	t.Helper()
	up := newUpstream(t)
	models := dataplanetest.NewModels(
		dataplane.Target{LogicalID: "chat", BaseURL: up.URL + "/v1", Model: "echo"},
		dataplane.Target{LogicalID: "thinker", BaseURL: up.URL + "/v1", Model: "think"},
		dataplane.Target{LogicalID: "slow", BaseURL: up.URL + "/v1", Model: "slow"},
		dataplane.Target{LogicalID: "broken", BaseURL: up.URL + "/v1", Model: "broken"},
	)
	dp, err := dataplane.New(dataplane.Options{Models: models, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	inference := testkit.New(t, testkit.Options{Options: httpx.Options{OpenAIPrefix: "/v1/"}}, dp)
	ic := client.NewInference(inference.URL, nil)

	store, err := runs.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sessions.NewService(db)
	if err != nil {
		t.Fatal(err)
	}
	ag := &agentsFake{}
	obs := &recorder{finished: map[string]runs.RunOutcome{}, events: map[string][]runtime.Event{}}
	svc, err := runs.NewService(runs.Options{
		Store: store, Executor: runtime.New(runtime.Deps{Models: ic}), Models: ic, Agents: ag,
		Sessions: sessionsAdapter{ss}, Observers: []runs.Observer{obs}, DurableMode: o.durable, Logger: zerolog.Nop(),
		Owner: o.owner, Now: o.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	mod := runs.New(svc, runs.ModuleOptions{InvokeToken: o.token, Keepalive: o.keepalive})
	srv := testkit.New(t, testkit.Options{}, mod, sessions.New(ss))
	return &bundle{srv: srv, up: up, agents: ag, sessions: ss, svc: svc, obs: obs, db: db}
}

// frame is one parsed SSE frame.
type frame struct {
	event string
	data  string
}

func (f frame) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(f.data), &m); err != nil {
		t.Fatalf("frame %q data %q: %v", f.event, f.data, err)
	}
	return m
}

// parseSSE splits a whole stream into frames; comments are returned with event ":".
func parseSSE(t *testing.T, body string) []frame {
	t.Helper()
	var out []frame
	for _, block := range strings.Split(body, "\n\n") {
		if block == "" {
			continue
		}
		var f frame
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, ":"):
				f.event = ":"
				f.data = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "event: "):
				f.event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				f.data += line[len("data: "):]
			default:
				t.Fatalf("unexpected SSE line %q in %q", line, body)
			}
		}
		out = append(out, f)
	}
	return out
}

// openStream posts and returns the live response and a frame reader.
func openStream(t *testing.T, url string, body any, headers ...string) (*http.Response, func() (frame, bool)) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, strings.NewReader(string(raw)))
	req.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	next := func() (frame, bool) {
		var f frame
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return f, false
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if f.event != "" || f.data != "" {
					return f, true
				}
			case strings.HasPrefix(line, ":"):
				f.event, f.data = ":", strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "event: "):
				f.event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				f.data += line[len("data: "):]
			}
		}
	}
	return resp, next
}

// waitRun polls GET /runs/{id} until the run has a final status.
func waitRun(t *testing.T, srv *testkit.Server, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r := srv.Do("GET", "/runs/"+id, nil)
		if r.Status != 200 {
			t.Fatalf("get run: %d %s", r.Status, r.Body)
		}
		m := r.Map(t)
		if s := m["status"]; s == runs.StatusCompleted || s == runs.StatusFailed {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %s did not finish", id)
	return nil
}

// countRuns counts the rows of the runs table.
func countRuns(t *testing.T, db *database.DB) int64 {
	t.Helper()
	var n int64
	if err := db.Table("runs").Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

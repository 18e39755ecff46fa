// Package hostile starts the real svc binary (both planes, SQLite and PostgreSQL) and sends
// every route its OpenAPI document lists a bounded battery of hostile input, asserting that
// nothing a client can send answers 5xx (beyond an explicit list of upstream-unavailable
// exceptions), that every error is the error envelope with a code, and that rejected
// writes store nothing.
package hostile

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

const (
	invokeToken   = "hostile-invoke-token"
	webhookSecret = "hostile-webhook-secret-0123456789"
	bodyLimit     = 1 << 20
	// maxRequests bounds one dialect's battery so the test stays a few seconds long.
	maxRequests = 12000
)

// exception is a documented 5xx: an upstream that is legitimately unavailable.
type exception struct {
	plane, method, route string
	status               int
	code                 string
	why                  string
	// when limits the exception to requests that target the unavailable upstream.
	when func(path string, body []byte) bool
}

// targetsDeadModel: the request names the model registered against a closed port.
func targetsDeadModel(_ string, body []byte) bool { return bytes.Contains(body, []byte(deadModel)) }

// always: the exception holds for any request on its route.
func always(string, []byte) bool { return true }

const deadModel = "dead-model"

// exceptions lists every 5xx the battery may see; anything else >= 500 fails the test.
var exceptions = []exception{
	// The registered tool server's command does not exist: starting it is an unavailable upstream.
	{"control", "POST", "/admin/mcp/servers/{name}:warm", 503, "mcp_unavailable", "tool server command cannot start", always},
	{"control", "GET", "/admin/mcp/servers/{name}/tools", 503, "mcp_unavailable", "listing tools connects lazily", always},
	// dead-model is registered against a closed port: its upstream is unreachable.
	{"inference", "POST", "/v1/chat/completions", 502, "upstream_unreachable", "dead-model upstream", targetsDeadModel},
	{"inference", "POST", "/v1/embeddings", 502, "upstream_unreachable", "dead-model upstream", targetsDeadModel},
	{"inference", "POST", "/v1/audio/speech", 502, "upstream_unreachable", "dead-model upstream", targetsDeadModel},
	{"inference", "POST", "/v1/images/generations", 502, "upstream_unreachable", "dead-model upstream", targetsDeadModel},
	{"inference", "POST", "/v1/audio/transcriptions", 502, "upstream_unreachable", "dead-model upstream", targetsDeadModel},
	// The model hub is down: a repo's detail (its files) can only come from the hub.
	{"inference", "GET", "/admin/catalog/models/{repo}", 502, "hub_unavailable", "model hub unreachable", always},
	{"inference", "GET", "/admin/catalog/models/{owner}/{name}", 502, "hub_unavailable", "model hub unreachable", always},
}

func TestHostileInputNeverAnswers5xx(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(dialect, func(t *testing.T) {
			dbURL := ""
			if dialect == database.Postgres {
				dbURL = dbtest.URL(t)
			}
			h := start(t, dbURL)
			h.seed()
			for _, plane := range []*plane{h.inference, h.control} {
				h.battery(plane)
			}
			t.Logf("%s: %d hostile requests, %d waiting runs resumed", dialect, h.sent, h.waitingRuns-1)
			// Every exception must have been needed: a stale one would hide a regression.
			for i, e := range exceptions {
				if h.excused[i] == 0 {
					t.Errorf("exception never seen: %s %s %s %d %s", e.plane, e.method, e.route, e.status, e.code)
				}
			}
			h.report()
		})
	}
}

type plane struct {
	name string
	base string
	spec map[string]map[string]json.RawMessage // path -> method -> operation
}

type harness struct {
	t                  *testing.T
	control, inference *plane
	upstream           string
	client             *http.Client
	vals               map[string]string // "{param}" or "METHOD route {param}" -> a valid value
	seeds              map[string]any    // "METHOD route" -> a valid JSON body
	sent               int
	failures           map[string]string // dedup key -> first example
	snapshots          map[string]string // plane+probe path -> last answer
	excused            map[int]int       // index in exceptions -> times it applied
	lastStatus         int               // status of the last checkNothingStored request
	waitingRuns        int               // durable runs started for resume bodies
	waitingRun         string
}

func start(t *testing.T, dbURL string) *harness {
	up := fakeUpstream(t)
	controlAddr, inferenceAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	p := testkit.Start(t, []string{
		"SERVICE_DATA_DIR=" + t.TempDir(),
		"SERVICE_CONTROL_ADDR=" + controlAddr,
		"SERVICE_INFERENCE_ADDR=" + inferenceAddr,
		"SERVICE_INFERENCE_URL=http://" + inferenceAddr,
		"SERVICE_DATABASE_URL=" + dbURL,
		"SERVICE_INVOKE_TOKEN=" + invokeToken,
		// The model hub is unreachable (a closed port): the catalog answers from its curated list.
		"SERVICE_CATALOG_HUB_URL=http://127.0.0.1:1",
		"SERVICE_SECRET_KEY=" + strings.Repeat("ab", 32),
		"SERVICE_DURABLE=1",
		"SERVICE_BODY_LIMIT=1MiB",
		"SERVICE_ARTIFACT_MAX_BYTES=1MiB",
		"SERVICE_LOG_LEVEL=error",
		"SERVICE_LOG_FORMAT=json",
		"SERVICE_UPSTREAM_TIMEOUT=20s",
	}, "serve", "all")
	p.WaitHTTP(t, "http://"+controlAddr+"/readyz", 200, 60*time.Second)
	h := &harness{
		t:         t,
		control:   &plane{name: "control", base: "http://" + controlAddr},
		inference: &plane{name: "inference", base: "http://" + inferenceAddr},
		upstream:  up.URL,
		client:    &http.Client{Timeout: 30 * time.Second},
		vals:      map[string]string{},
		failures:  map[string]string{},
		snapshots: map[string]string{},
		excused:   map[int]int{},
	}
	for _, pl := range []*plane{h.control, h.inference} {
		r := testkit.Do(t, pl.base, "GET", "/openapi.json", nil)
		var doc struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		if r.Status != 200 {
			t.Fatalf("%s /openapi.json: %d", pl.name, r.Status)
		}
		r.JSON(t, &doc)
		if len(doc.Paths) == 0 {
			t.Fatalf("%s /openapi.json lists no paths", pl.name)
		}
		pl.spec = doc.Paths
	}
	return h
}

// must sends a setup request and fails the test unless it answers want.
func (h *harness) must(pl *plane, method, path string, body any, want int, headers ...string) map[string]any {
	h.t.Helper()
	r := testkit.Do(h.t, pl.base, method, path, body, headers...)
	if r.Status != want {
		h.t.Fatalf("seed %s %s: %d %s", method, path, r.Status, r.Body)
	}
	if len(r.Body) == 0 || r.Body[0] != '{' {
		return nil
	}
	return r.Map(h.t)
}

func greeterIR(id string) map[string]any {
	ir := map[string]any{
		"nodes": []any{
			map[string]any{"id": "shape", "kind": "transform", "expr": `{greeting: "Hello, " + $in.in.name}`},
			map[string]any{"id": "out", "kind": "output", "value": "$in.in.greeting"},
		},
		"edges": []any{map[string]any{"source": "shape", "target": "out"}},
	}
	if id != "" {
		ir["id"] = id
	}
	return ir
}

// seed creates one valid resource of every kind, so path parameters can name real ones and
// bodies reach the handlers' deeper layers, and records the seed bodies of the battery.
func (h *harness) seed() {
	t := h.t
	in, c := h.inference, h.control
	h.must(in, "PUT", "/admin/credentials/HOSTILE_TOKEN", map[string]any{"value": "upstream-key"}, 201)
	h.must(in, "PUT", "/admin/models/chat", map[string]any{"binding": "hosted-compatible", "baseUrl": h.upstream + "/v1", "model": "fake", "credentialRef": "secret://HOSTILE_TOKEN"}, 201)
	dead := testkit.FreeAddr(t) // nothing listens there
	h.must(in, "PUT", "/admin/models/"+deadModel, map[string]any{"binding": "hosted-compatible", "baseUrl": "http://" + dead + "/v1", "model": "fake"}, 201)

	h.must(c, "POST", "/agents", map[string]any{"ir": greeterIR("greeter"), "name": "greeter"}, 201)
	h.must(c, "POST", "/agents", map[string]any{"ir": map[string]any{"id": "ask", "nodes": []any{
		map[string]any{"id": "h", "kind": "human", "prompt": "Hello $in.in.who?"}, map[string]any{"id": "o", "kind": "output"}},
		"edges": []any{map[string]any{"source": "h", "target": "o"}}}}, 201)
	h.must(c, "POST", "/sessions", map[string]any{"id": "ses-seed", "metadata": map[string]any{"k": "v"}}, 201)
	conn := h.must(c, "POST", "/connections", map[string]any{"name": "conn1", "kind": "http_auth", "config": map[string]any{"type": "header"}, "secret": "s3cret"}, 201)
	hook := h.must(c, "POST", "/triggers", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "1", "config": map[string]any{"secret": webhookSecret}}, 201)
	sched := h.must(c, "POST", "/triggers", map[string]any{"agent_id": "greeter", "kind": "schedule", "version": "1", "config": map[string]any{"cron": "0 0 1 1 *"}, "enabled": false}, 201)
	h.must(c, "POST", "/bench/presets", map[string]any{"name": "p1", "params": map[string]any{"t": 1}}, 201)
	h.must(c, "POST", "/bench/suites", map[string]any{"id": "suite1", "name": "s", "cases": []any{map[string]any{"id": "c1", "input": map[string]any{"a": 1}}}}, 201)
	bres := h.must(c, "POST", "/bench/runs", map[string]any{"agent_id": "greeter", "metrics": map[string]any{"m": 1}}, 201)
	h.must(c, "PUT", "/admin/mcp/servers/srv1", map[string]any{"transport": "stdio", "command": "/nonexistent/svc-hostile-mcp"}, 201)
	art := h.must(c, "POST", "/artifacts", "hello artifact", 201)
	run := h.must(c, "POST", "/agents/greeter/runs", map[string]any{"input": map[string]any{"name": "Ada"}, "stream": false}, 200)
	h.waitingRun = h.newWaitingRun()

	// The listings the no-store check reads must parse as id lists holding the seeds, or
	// that check would compare nothing.
	for probe, id := range map[string]string{
		"/agents?limit=5": "ask", "/sessions?limit=5": "ses-seed", "/connections?limit=5": fmt.Sprint(conn["id"]),
		"/triggers?limit=5": fmt.Sprint(sched["id"]), "/bench/presets?limit=5": "p1", "/bench/suites?limit=5": "suite1",
		"/bench/runs?limit=5": fmt.Sprint(bres["id"]), "/runs?limit=3": h.waitingRun, "/admin/mcp/servers": "srv1",
	} {
		snap := h.snapshot(c, probe)
		if !strings.HasPrefix(snap, "200 ") || strings.Contains(snap, "{") || !strings.Contains(snap, id) {
			t.Fatalf("probe %s does not list %s as an id: %s", probe, id, short(snap))
		}
	}
	for probe, id := range map[string]string{"/admin/models": "chat", "/admin/credentials": "HOSTILE_TOKEN"} {
		if snap := h.snapshot(in, probe); !strings.HasPrefix(snap, "200 ") || strings.Contains(snap, "{") || !strings.Contains(snap, id) {
			t.Fatalf("probe %s does not list %s as an id: %s", probe, id, short(snap))
		}
	}
	h.vals = map[string]string{
		"{name}":    "srv1",
		"{id}":      "greeter",
		"{version}": "1",
		"{ref}":     fmt.Sprint(art["ref"]),
		"{node_id}": "shape",

		"/bench/presets/{name}":           "p1",
		"/bench/runs/{id}":                fmt.Sprint(bres["id"]),
		"/bench/suites/{id}":              "suite1",
		"/connections/{id}":               fmt.Sprint(conn["id"]),
		"/hooks/{id}":                     fmt.Sprint(hook["id"]),
		"/triggers/{id}":                  fmt.Sprint(sched["id"]),
		"/runs/{id}":                      fmt.Sprint(run["runId"]),
		"/runs/{id}/trace":                fmt.Sprint(run["runId"]),
		"/runs/{id}/trace/stream":         fmt.Sprint(run["runId"]),
		"/runs/{id}/nodes/{node_id}/io":   fmt.Sprint(run["runId"]),
		"/runs/{id}/resume":               h.waitingRun,
		"/sessions/{id}":                  "ses-seed",
		"/sessions/{id}/turns":            "ses-seed",
		"/admin/credentials/{name}":       "HOSTILE_TOKEN",
		"/admin/models/{id}":              "chat",
		"/admin/models/{id}:warm":         "chat",
		"/admin/models/{id}:evict":        "chat",
		"/admin/models/{id}/capabilities": "chat",
		"/v1/models/{id}":                 "chat",
		// Writes the battery must not point at the seeds other routes rely on.
		"PUT /admin/models/{id}":        "scratch",
		"PUT /admin/credentials/{name}": "SCRATCH",
		"PUT /admin/mcp/servers/{name}": "scratch",
	}
	h.seeds = map[string]any{
		"POST /agents":                   map[string]any{"ir": greeterIR("hx"), "name": "n", "version": "1", "canvas": map[string]any{"shape": map[string]any{"x": 1}}},
		"POST /agents/{id}/versions":     map[string]any{"ir": greeterIR("greeter"), "version": "2", "canvas": map[string]any{}},
		"PUT /agents/{id}/io-policy":     map[string]any{"io_capture": "full", "io_retention_seconds": 60, "redact_rules": []any{map[string]any{"path": "a.b", "replacement": "x"}, map[string]any{"pattern": `\d+`}}},
		"POST /agents/{id}/runs":         map[string]any{"input": map[string]any{"name": "Ada"}, "version": "1", "session_id": "ses-seed", "stream": false},
		"POST /agents/{id}/invoke":       map[string]any{"input": map[string]any{"name": "Ada"}, "version": "1", "session_id": "ses-seed"},
		"POST /agents/{id}/durable-runs": map[string]any{"input": map[string]any{"name": "Ada"}, "version": "1"},
		"POST /bench/presets":            map[string]any{"name": "p2", "description": "d", "params": map[string]any{"t": 0.5}},
		"POST /bench/runs":               map[string]any{"agent_id": "greeter", "logical_id": "chat", "suite_id": "suite1", "case_id": "c1", "labels": map[string]any{"k": "v"}, "metrics": map[string]any{"m": 1.5}, "notes": "n", "params": map[string]any{"a": 1}, "preset": "p1"},
		"POST /bench/suites":             map[string]any{"id": "suite2", "name": "s", "description": "d", "cases": []any{map[string]any{"id": "c1", "input": map[string]any{"a": 1}, "expected": "x", "tags": []any{"t"}}}},
		"POST /connections":              map[string]any{"name": "conn2", "kind": "http_auth", "config": map[string]any{"type": "header", "header": "Authorization", "scheme": "Bearer"}, "secret": "s3cret", "enabled": true},
		"PATCH /connections/{id}":        map[string]any{"config": map[string]any{"type": "header"}, "secret": "new", "enabled": true},
		"POST /graphs/runs":              map[string]any{"ir": greeterIR(""), "input": map[string]any{"name": "Ada"}, "stream": false, "session_id": "ses-seed"},
		"POST /hooks/{id}":               map[string]any{"name": "Ada"},
		"POST /runs":                     map[string]any{"input": "hello", "model": "chat", "params": map[string]any{"temperature": 0.5}, "stream": false, "session_id": "ses-seed"},
		"POST /runs/{id}/resume":         map[string]any{"input": map[string]any{"ok": true}},
		"POST /sessions":                 map[string]any{"id": "ses-2", "metadata": map[string]any{"k": "v"}},
		"POST /sessions/{id}/turns":      map[string]any{"user_content": "u", "assistant_content": "a"},
		"POST /triggers":                 map[string]any{"agent_id": "greeter", "kind": "schedule", "version": "1", "config": map[string]any{"cron": "0 0 1 1 *", "timezone": "UTC", "input": map[string]any{"name": "x"}}, "enabled": false},
		"PATCH /triggers/{id}":           map[string]any{"enabled": false, "config": map[string]any{"cron": "0 0 1 1 *", "timezone": "Europe/Paris", "input": map[string]any{"a": 1}}},
		"PUT /admin/mcp/servers/{name}":  map[string]any{"transport": "stdio", "command": "/nonexistent/x", "args": []any{"a"}, "env": map[string]any{"K": "V"}, "timeoutMs": 1000},
		"PUT /admin/credentials/{name}":  map[string]any{"value": "v"},
		"PUT /admin/models/{id}":         map[string]any{"binding": "hosted-compatible", "baseUrl": h.upstream + "/v1", "model": "fake", "credentialRef": "secret://HOSTILE_TOKEN", "maxTokens": 100, "modalities": []any{"chat"}},
		"POST /v1/chat/completions":      map[string]any{"model": "chat", "messages": []any{map[string]any{"role": "user", "content": "hi"}, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "x"}, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,aGk="}}}}}, "stream": false, "max_tokens": 5},
		"POST /v1/embeddings":            map[string]any{"model": "chat", "input": []any{"a", "b"}},
		"POST /v1/audio/speech":          map[string]any{"model": "chat", "input": "hello", "voice": "alloy"},
		"POST /v1/images/generations":    map[string]any{"model": "chat", "prompt": "p", "size": "256x256", "n": 1, "steps": 2},
	}
}

// newWaitingRun starts a durable run of the human-node agent and returns its id once it
// waits, so resume bodies meet a run they can actually resume.
func (h *harness) newWaitingRun() string {
	h.t.Helper()
	durable := h.must(h.control, "POST", "/agents/ask/durable-runs", map[string]any{"input": map[string]any{"who": "Ada"}}, 202)
	id := fmt.Sprint(durable["run_id"])
	h.waitingRuns++
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := h.must(h.control, "GET", "/runs/"+id, nil, 200)
		if r["status"] == "waiting" {
			return id
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("durable run never waited: %v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// request is one hostile request.
type request struct {
	plane   *plane
	method  string
	route   string // the OpenAPI path template
	path    string // the path and query actually sent (already escaped as wanted)
	body    []byte
	ctype   string
	headers map[string]string
	what    string // a short description for failure reports
}

type response struct {
	status int
	ctype  string
	body   []byte
}

func (h *harness) send(rq request) (response, error) {
	h.sent++
	if h.sent > maxRequests {
		h.t.Fatalf("battery exceeded %d requests", maxRequests)
	}
	u, _ := url.Parse(rq.plane.base)
	// Opaque keeps the path bytes exactly as built (raw %-escapes, non-ASCII bytes).
	p, q, _ := strings.Cut(rq.path, "?")
	u.Opaque, u.RawQuery = p, q
	var rd io.Reader
	if rq.body != nil {
		rd = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequest(rq.method, rq.plane.base, rd)
	if err != nil {
		return response{}, err
	}
	req.URL = u
	if rq.ctype != "" {
		req.Header.Set("Content-Type", rq.ctype)
	}
	for k, v := range rq.headers {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	out := response{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type")}
	if strings.HasPrefix(out.ctype, "text/event-stream") {
		// Streams are judged by status; their frames are the runs tests' business.
		return out, nil
	}
	out.body, err = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return out, err
}

func (h *harness) fail(key, format string, args ...any) {
	if _, seen := h.failures[key]; !seen {
		h.failures[key] = fmt.Sprintf(format, args...)
	}
}

func (h *harness) report() {
	if len(h.failures) == 0 {
		return
	}
	keys := make([]string, 0, len(h.failures))
	for k := range h.failures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.t.Errorf("%s\n    e.g. %s", k, h.failures[k])
	}
}

// check sends rq and judges the answer; it returns the response (status 0 on transport error).
func (h *harness) check(rq request) response {
	resp, err := h.send(rq)
	route := rq.plane.name + " " + rq.method + " " + rq.route
	if err != nil {
		h.fail(route+" transport error", "%s %s (%s): %v", rq.method, short(rq.path), rq.what, err)
		return resp
	}
	code := ""
	if resp.status >= 400 && rq.method != http.MethodHead {
		var env struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(resp.body, &env); err != nil || env.Error.Code == "" {
			h.fail(fmt.Sprintf("%s %d without an error envelope", route, resp.status), "%s %s (%s): %q", rq.method, short(rq.path), rq.what, short(string(resp.body)))
		} else if rq.plane == h.inference && strings.HasPrefix(rq.path, "/v1/") && (env.Error.Message == "" || env.Error.Type == "") {
			h.fail(fmt.Sprintf("%s %d not in the OpenAI error shape", route, resp.status), "%s %s (%s): %s", rq.method, short(rq.path), rq.what, short(string(resp.body)))
		}
		code = env.Error.Code
	}
	if resp.status >= 500 && !h.excepted(rq, resp.status, code) {
		h.fail(fmt.Sprintf("%s answered %d %s", route, resp.status, code), "%s %s (%s) body %q -> %s", rq.method, short(rq.path), rq.what, short(string(rq.body)), short(string(resp.body)))
	}
	return resp
}

func (h *harness) excepted(rq request, status int, code string) bool {
	for i, e := range exceptions {
		if e.plane == rq.plane.name && e.method == rq.method && e.route == rq.route && e.status == status && e.code == code && e.when(rq.path, rq.body) {
			h.excused[i]++
			return true
		}
	}
	return false
}

func short(s string) string {
	if len(s) > 160 {
		return fmt.Sprintf("%s…(%d bytes)", s[:160], len(s))
	}
	return s
}

// operation is one (method, path template) of a plane's OpenAPI document.
type operation struct {
	method, route string
	pathParams    []string
	queryParams   []string
	jsonBody      bool
	anyBody       bool
}

var paramRE = regexp.MustCompile(`\{[A-Za-z_]+\}`)

func (pl *plane) operations(t *testing.T) []operation {
	var ops []operation
	for path, methods := range pl.spec {
		var common []param
		if raw, ok := methods["parameters"]; ok {
			_ = json.Unmarshal(raw, &common)
		}
		for m, raw := range methods {
			if m == "parameters" || strings.HasPrefix(m, "x-") {
				continue
			}
			var op struct {
				Parameters  []param `json:"parameters"`
				RequestBody *struct {
					Content map[string]json.RawMessage `json:"content"`
				} `json:"requestBody"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", m, path, err)
			}
			o := operation{method: strings.ToUpper(m), route: path, pathParams: paramRE.FindAllString(path, -1)}
			for _, p := range append(common, op.Parameters...) {
				if p.In == "query" {
					o.queryParams = append(o.queryParams, p.Name)
				}
			}
			if op.RequestBody != nil {
				o.anyBody = true
				_, o.jsonBody = op.RequestBody.Content["application/json"]
			}
			ops = append(ops, o)
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].route != ops[j].route {
			return ops[i].route < ops[j].route
		}
		return ops[i].method < ops[j].method
	})
	return ops
}

type param struct {
	Name string `json:"name"`
	In   string `json:"in"`
}

// valid returns a real value for a path parameter of an operation.
func (h *harness) valid(op operation, p string) string {
	for _, k := range []string{op.method + " " + op.route, op.route} {
		if v, ok := h.vals[k]; ok && len(op.pathParams) == 1 {
			return v
		}
		if v, ok := h.vals[k]; ok && p == "{id}" {
			return v
		}
	}
	return h.vals[p]
}

func (h *harness) fill(op operation, override map[string]string) string {
	path := op.route
	for _, p := range op.pathParams {
		v, ok := override[p]
		if !ok {
			v = h.valid(op, p)
		}
		path = strings.Replace(path, p, v, 1)
	}
	return path
}

// hostilePathValues are sent raw in the request line.
var hostilePathValues = []string{
	"..", "%2e%2e", "..%2F..%2Fetc%2Fpasswd", "%00", "a%00b", "%ff%fe", "\xff\xfe", "%C3%A9%F0%9F%99%82",
	"%E2%80%AE", "-1", "99999999999999999999999999", "%27%20OR%201%3D1--", "a%2Fb", "a:b",
	"art_..%2F..%2Fsvc.db", "trg_" + strings.Repeat("g", 32), strings.Repeat("x", 4000), "", "%2F",
}

// hostileQueryValues replace one query parameter at a time.
var hostileQueryValues = []string{
	"-1", "0", "201", "99999999999999999999", "abc", "1.5", "%00", "%ff", "%C3%A9", "!!!",
	"eyJ4Ijp9", "MjAyNi0wMS0wMVQwMDowMDowMFp8eA", strings.Repeat("A", 3000), "",
}

func (h *harness) battery(pl *plane) {
	ops := pl.operations(h.t)
	h.methodBattery(pl, ops)
	for _, op := range ops {
		if op.route == "/openapi.json" || op.route == "/metrics" {
			continue
		}
		h.pathBattery(pl, op)
		h.queryBattery(pl, op)
		h.headerBattery(pl, op)
		if op.anyBody || op.method == "POST" || op.method == "PUT" || op.method == "PATCH" {
			h.bodyBattery(pl, op)
		}
	}
}

// seedBody is the valid body of an operation (nil when it has none); the path is filled.
func (h *harness) seedBody(op operation) []byte {
	s, ok := h.seeds[op.method+" "+op.route]
	if !ok {
		if op.jsonBody {
			return []byte("{}")
		}
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// decorate adds what every request of the operation needs to get past authentication.
func (h *harness) decorate(rq request) request {
	if rq.headers == nil {
		rq.headers = map[string]string{}
	}
	switch rq.route {
	case "/agents/{id}/invoke":
		if _, set := rq.headers["Authorization"]; !set {
			rq.headers["Authorization"] = "Bearer " + invokeToken
		}
	case "/hooks/{id}":
		if _, set := rq.headers["X-Service-Signature"]; !set {
			mac := hmac.New(sha256.New, []byte(webhookSecret))
			mac.Write(rq.body)
			rq.headers["X-Service-Signature"] = "sha256=" + hex.EncodeToString(mac.Sum(nil))
		}
	}
	return rq
}

func (h *harness) pathBattery(pl *plane, op operation) {
	body := h.seedBody(op)
	ctype := ""
	if body != nil {
		ctype = "application/json"
	}
	for _, p := range op.pathParams {
		for _, v := range hostilePathValues {
			rq := h.decorate(request{plane: pl, method: op.method, route: op.route, path: h.fill(op, map[string]string{p: v}), body: body, ctype: ctype, what: "path " + p + "=" + short(v)})
			h.checkNothingStored(op, rq)
		}
	}
}

func (h *harness) queryBattery(pl *plane, op operation) {
	for _, q := range op.queryParams {
		for _, v := range hostileQueryValues {
			h.check(request{plane: pl, method: op.method, route: op.route, path: h.fill(op, nil) + "?" + q + "=" + v, what: "query " + q + "=" + short(v)})
		}
		h.check(request{plane: pl, method: op.method, route: op.route, path: h.fill(op, nil) + "?" + q + "=1&" + q + "=abc", what: "query repeated " + q})
	}
}

// methodBattery sends every method a path does not list: a 4xx in the envelope.
func (h *harness) methodBattery(pl *plane, ops []operation) {
	listed := map[string]map[string]bool{}
	for _, op := range ops {
		if listed[op.route] == nil {
			listed[op.route] = map[string]bool{}
		}
		listed[op.route][op.method] = true
	}
	for route, methods := range listed {
		op := operation{route: route, pathParams: paramRE.FindAllString(route, -1)}
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"} {
			if methods[m] || (m == "OPTIONS") {
				continue
			}
			resp := h.check(request{plane: pl, method: m, route: route, path: h.fill(op, nil), body: []byte("{}"), ctype: "application/json", what: "unlisted method"})
			// 4xx: 404/405, or 400 where an action suffix reads as part of an id
			// (PUT /admin/models/x:warm is PUT /admin/models/{id} with a bad id).
			if (resp.status < 400 || resp.status >= 500) && !(m == "GET" && methods["HEAD"]) {
				h.fail(fmt.Sprintf("%s %s %s: unlisted method answered %d", pl.name, m, route, resp.status), "%s", short(string(resp.body)))
			}
		}
	}
}

// headerBattery sends hostile conditional and range headers to the routes that serve blobs.
func (h *harness) headerBattery(pl *plane, op operation) {
	if op.route != "/artifacts/{ref}" {
		return
	}
	for _, hd := range []map[string]string{
		{"Range": "bytes=999999-"}, {"Range": "bytes=5-1"}, {"Range": "bytes=abc"}, {"Range": "bytes=-0"},
		{"Range": "bytes=0-1,2-3"}, {"Range": "bytes=" + strings.Repeat("0-1,", 2000) + "0-1"}, {"Range": "lines=1-2"},
		{"Range": "bytes=0-99999999999999999999"}, {"If-None-Match": "\xff"}, {"If-Modified-Since": "yesterday"},
		{"If-Range": "\"x\""}, {"If-Match": "*"}, {"If-Unmodified-Since": "Mon, 02 Jan 2006 15:04:05 GMT"},
	} {
		var what []string
		for k, v := range hd {
			what = append(what, k+": "+short(v))
		}
		h.check(request{plane: pl, method: op.method, route: op.route, path: h.fill(op, nil), headers: hd, what: strings.Join(what, ", ")})
	}
}

package agents

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/httpx"
	"github.com/svc-dev/svc/platform/testkit"
)

const greeter = `{"id":"greeter","nodes":[{"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name}"},{"id":"out","kind":"output","value":"$in.in.greeting"}],"edges":[{"source":"shape","target":"out"}]}`

// greeterShuffled is greeter with other key order and whitespace: same content.
const greeterShuffled = `{ "edges": [ {"target": "out", "source": "shape"} ],
  "nodes": [ {"expr": "{greeting: \"Hello, \" + $in.in.name}", "kind": "transform", "id": "shape"},
             {"value": "$in.in.greeting", "id": "out", "kind": "output"} ],
  "id": "greeter" }`

const triage = `{"id":"triage","nodes":[{"id":"route","kind":"router","select":"$in.in.kind","handles":["bug","question"]},{"id":"eng","kind":"transform","expr":"{queue: \"eng\", title: $in.in.title}"},{"id":"support","kind":"transform","expr":"{queue: \"support\", title: $in.in.title}"},{"id":"out","kind":"output"}],"edges":[{"source":"route","sourcePort":"bug","target":"eng"},{"source":"route","sourcePort":"question","target":"support"},{"source":"eng","target":"out"},{"source":"support","target":"out"}]}`

func setup(t *testing.T, db *database.DB, opts ...httpx.Options) (*testkit.Server, *Service) {
	t.Helper()
	svc, err := NewService(db)
	if err != nil {
		t.Fatal(err)
	}
	o := testkit.Options{}
	if len(opts) > 0 {
		o.Options = opts[0]
	}
	return testkit.New(t, o, New(svc)), svc
}

// rep is strings.Replace that insists on a match, so a scenario cannot silently test nothing.
func rep(s, old, new string, n int) string {
	if !strings.Contains(s, old) {
		panic("rep: " + old + " not found")
	}
	return strings.Replace(s, old, new, n)
}

func body(ir string, extra ...string) string {
	return `{"ir":` + ir + strings.Join(extra, "") + `}`
}

func TestPublishScenarios(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv, _ := setup(t, db)
		hash, _ := graph.ContentHash(json.RawMessage(greeter))
		steps := []struct {
			name         string
			method, path string
			body         any
			status       int
			code         string
			check        func(t *testing.T, m map[string]any)
		}{
			{"create", "POST", "/agents", body(greeter, `,"name":"Greeter","canvas":{"shape":{"x":1,"y":2}}`), 201, "", func(t *testing.T, m map[string]any) {
				if m["id"] != "greeter" || m["version"] != "1" || m["content_hash"] != hash || m["name"] != "Greeter" {
					t.Errorf("created %v", m)
				}
			}},
			{"existing id", "POST", "/agents", body(greeter), 409, "agent_exists", nil},
			{"missing ir id", "POST", "/agents", body(`{"nodes":[{"id":"o","kind":"output"}]}`), 400, "invalid_ir", nil},
			{"non-JSON body", "POST", "/agents", `{"ir": nope`, 400, "invalid_request", nil},
			{"empty body", "POST", "/agents", ``, 400, "invalid_request", nil},
			{"ir not an object", "POST", "/agents", `{"ir":[1,2]}`, 400, "invalid_ir", nil},
			{"ir missing", "POST", "/agents", `{"name":"x"}`, 400, "invalid_ir", nil},
			{"unknown body field", "POST", "/agents", body(triage, `,"nmae":"x"`), 400, "invalid_request", nil},
			{"bad version", "POST", "/agents", body(triage, `,"version":"../x"`), 400, "invalid_request", nil},
			{"canvas not an object", "POST", "/agents", body(triage, `,"canvas":[1]`), 400, "invalid_request", nil},
			{"unknown kind", "POST", "/agents", body(rep(triage, `"kind":"router"`, `"kind":"switch"`, 1)), 400, "invalid_ir", nil},
			{"duplicate node ids", "POST", "/agents", body(rep(triage, `"id":"support"`, `"id":"eng"`, 1)), 400, "invalid_ir", nil},
			{"edge to a missing node", "POST", "/agents", body(rep(triage, `"target":"out"}]`, `"target":"nowhere"}]`, 1)), 400, "invalid_ir", nil},
			{"edge from a missing port", "POST", "/agents", body(rep(triage, `"sourcePort":"bug"`, `"sourcePort":"feature"`, 1)), 400, "invalid_ir", nil},
			{"cycle", "POST", "/agents", body(rep(triage, `{"source":"support","target":"out"}`, `{"source":"support","target":"eng"},{"source":"eng","target":"support"}`, 1)), 400, "invalid_ir", nil},
			{"token naming an unknown port", "POST", "/agents", body(rep(triage, `\"eng\", title: $in.in.title`, `\"eng\", title: $in.side.title`, 1)), 400, "invalid_ir", nil},
			{"router without handles", "POST", "/agents", body(rep(triage, `"handles":["bug","question"]`, `"handles":[]`, 1)), 400, "invalid_ir", func(t *testing.T, m map[string]any) {
				ps := m["error"].(map[string]any)["details"].(map[string]any)["problems"].([]any)
				if len(ps) < 2 {
					t.Errorf("expected every problem, got %v", ps)
				}
				first := ps[0].(map[string]any)
				if first["path"] == nil || first["message"] == nil {
					t.Errorf("problem shape %v", first)
				}
			}},
			{"triage", "POST", "/agents", body(triage), 201, "", nil},
			{"unknown agent version", "POST", "/agents/nope/versions", body(greeter), 404, "agent_not_found", nil},
			{"id mismatch", "POST", "/agents/greeter/versions", body(triage), 400, "invalid_ir", nil},
			{"same version same content, shuffled", "POST", "/agents/greeter/versions", body(greeterShuffled, `,"version":"1"`), 200, "", func(t *testing.T, m map[string]any) {
				if m["version"] != "1" || m["content_hash"] != hash {
					t.Errorf("idempotent answer %v", m)
				}
			}},
			{"same version different content", "POST", "/agents/greeter/versions", body(rep(greeter, "Hello", "Hi", 1), `,"version":"1"`), 409, "version_conflict", nil},
			{"next integer version", "POST", "/agents/greeter/versions", body(rep(greeter, "Hello", "Hi", 1)), 201, "", func(t *testing.T, m map[string]any) {
				if m["version"] != "2" {
					t.Errorf("version %v, want 2", m["version"])
				}
			}},
			{"named version", "POST", "/agents/greeter/versions", body(rep(greeter, "Hello", "Hey", 1), `,"version":"beta"`), 201, "", nil},
			{"next integer after a name", "POST", "/agents/greeter/versions", body(rep(greeter, "Hello", "Yo", 1)), 201, "", func(t *testing.T, m map[string]any) {
				if m["version"] != "3" {
					t.Errorf("version %v, want 3", m["version"])
				}
			}},
			{"get agent", "GET", "/agents/greeter", nil, 200, "", func(t *testing.T, m map[string]any) {
				vs := m["versions"].([]any)
				var names []string
				for _, v := range vs {
					names = append(names, v.(map[string]any)["version"].(string))
					if !strings.HasPrefix(v.(map[string]any)["content_hash"].(string), "sha256:") {
						t.Errorf("version without hash %v", v)
					}
				}
				if strings.Join(names, ",") != "3,beta,2,1" {
					t.Errorf("versions %v, want newest first", names)
				}
			}},
			{"get version", "GET", "/agents/greeter/versions/1", nil, 200, "", func(t *testing.T, m map[string]any) {
				ir, _ := json.Marshal(m["ir"])
				if h, _ := graph.ContentHash(ir); h != hash || m["content_hash"] != hash {
					t.Errorf("stored IR hashes to %s", h)
				}
				if c, _ := json.Marshal(m["canvas"]); string(c) != `{"shape":{"x":1,"y":2}}` {
					t.Errorf("canvas %s", c)
				}
			}},
			{"unknown version", "GET", "/agents/greeter/versions/9", nil, 404, "version_not_found", nil},
			{"unknown agent", "GET", "/agents/nope", nil, 404, "agent_not_found", nil},
			{"delete agent", "DELETE", "/agents/greeter", nil, 405, "method_not_allowed", nil},
			{"delete version", "DELETE", "/agents/greeter/versions/1", nil, 405, "method_not_allowed", nil},
			{"schema", "GET", "/schemas/ir.json", nil, 200, "", func(t *testing.T, m map[string]any) {
				if m["$schema"] == nil || m["$defs"] == nil {
					t.Errorf("schema %v", m)
				}
			}},
		}
		for _, st := range steps {
			r := srv.Do(st.method, st.path, st.body)
			if r.Status != st.status || r.ErrorCode() != st.code {
				t.Fatalf("%s: %s %s → %d %s, want %d %q\n%s", st.name, st.method, st.path, r.Status, r.ErrorCode(), st.status, st.code, r.Body)
			}
			if st.check != nil {
				st.check(t, r.Map(t))
			}
		}
		// Nothing from the rejected requests was stored.
		r := srv.Do("GET", "/agents", nil)
		var page Page
		r.JSON(t, &page)
		if len(page.Agents) != 2 || page.Agents[0].ID != "triage" || page.Agents[1].ID != "greeter" {
			t.Fatalf("agents %+v", page.Agents)
		}
		if page.Agents[1].Latest == nil || page.Agents[1].Latest.Version != "3" {
			t.Fatalf("latest %+v", page.Agents[1].Latest)
		}
	})
}

func TestListPaging(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv, _ := setup(t, db)
		for i := range 5 {
			ir := rep(greeter, `"id":"greeter"`, fmt.Sprintf(`"id":"a%d"`, i), 1)
			if r := srv.Do("POST", "/agents", body(ir)); r.Status != 201 {
				t.Fatalf("create: %d %s", r.Status, r.Body)
			}
		}
		var seen []string
		path := "/agents?limit=2"
		for range 5 {
			var page Page
			r := srv.Do("GET", path, nil)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", path, r.Status, r.Body)
			}
			r.JSON(t, &page)
			for _, a := range page.Agents {
				seen = append(seen, a.ID)
			}
			if page.Next == "" {
				break
			}
			path = "/agents?limit=2&before=" + page.Next
		}
		if strings.Join(seen, ",") != "a4,a3,a2,a1,a0" {
			t.Fatalf("pages gave %v", seen)
		}
		for _, q := range []string{"limit=0", "limit=201", "limit=x", "before=garbage"} {
			if r := srv.Do("GET", "/agents?"+q, nil); r.Status != 400 || r.ErrorCode() != "invalid_request" {
				t.Errorf("%s: %d %s", q, r.Status, r.ErrorCode())
			}
		}
	})
}

func TestIOPolicy(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv, _ := setup(t, db)
		r := srv.Do("POST", "/agents", body(greeter))
		hash := r.Map(t)["content_hash"]

		r = srv.Do("GET", "/agents/greeter/io-policy", nil)
		if m := r.Map(t); r.Status != 200 || m["io_capture"] != DefaultCapture || m["io_retention_seconds"] != nil {
			t.Fatalf("default policy: %d %s", r.Status, r.Body)
		}
		tests := []struct {
			body   string
			status int
		}{
			{`{"io_capture":"full","io_retention_seconds":86400,"redact_rules":[{"path":"user.email"},{"pattern":"(?i)bearer\\s+\\S+","replacement":"***"}]}`, 200},
			{`{"io_capture":"everything"}`, 400},
			{`{}`, 400},
			{`{"io_capture":"off","io_retention_seconds":-1}`, 400},
			{`{"io_capture":"off","redact_rules":[{"pattern":"("}]}`, 400},
			{`{"io_capture":"off","redact_rules":[{}]}`, 400},
			{`{"io_capture":"off","redact_rules":[{"path":"a..b"}]}`, 400},
			{`{"io_capture":"off","redact_rules":[{"path":"a","pattern":"b"}]}`, 400},
			{`{"io_capture":"off","extra":1}`, 400},
			{`not json`, 400},
		}
		for _, tt := range tests {
			r := srv.Do("PUT", "/agents/greeter/io-policy", tt.body)
			if r.Status != tt.status {
				t.Errorf("%s: %d %s", tt.body, r.Status, r.Body)
			}
		}
		// Only the first (valid) PUT took effect.
		var pol IOPolicy
		srv.Do("GET", "/agents/greeter/io-policy", nil).JSON(t, &pol)
		if pol.IOCapture != CaptureFull || pol.IORetentionSeconds == nil || *pol.IORetentionSeconds != 86400 || len(pol.RedactRules) != 2 {
			t.Fatalf("stored policy %+v", pol)
		}
		if r := srv.Do("PUT", "/agents/nope/io-policy", `{"io_capture":"off"}`); r.Status != 404 || r.ErrorCode() != "agent_not_found" {
			t.Fatalf("unknown agent: %d %s", r.Status, r.Body)
		}
		// The policy never changes a content hash.
		m := srv.Do("GET", "/agents/greeter", nil).Map(t)
		if v := m["versions"].([]any)[0].(map[string]any); v["content_hash"] != hash {
			t.Fatalf("hash moved: %v vs %v", v["content_hash"], hash)
		}
		if r := srv.Do("POST", "/agents/greeter/versions", body(greeter, `,"version":"1"`)); r.Status != 200 {
			t.Fatalf("republish after policy change: %d %s", r.Status, r.Body)
		}
	})
}

func TestBodyLimit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv, _ := setup(t, db, httpx.Options{BodyLimit: 1 << 10})
		big := rep(greeter, `"id":"greeter"`, `"id":"big","description":"`+strings.Repeat("x", 2<<10)+`"`, 1)
		if r := srv.Do("POST", "/agents", body(big)); r.Status != http.StatusRequestEntityTooLarge || r.ErrorCode() != "payload_too_large" {
			t.Fatalf("big IR: %d %s", r.Status, r.Body)
		}
		if r := srv.Do("GET", "/agents/big", nil); r.Status != 404 {
			t.Fatalf("big IR stored: %d", r.Status)
		}
	})
}

func TestPathologicalNesting(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv, _ := setup(t, db)
		deep := `{"id":"deep","nodes":[{"id":"o","kind":"output","value":` + strings.Repeat(`[`, 5000) + strings.Repeat(`]`, 5000) + `}]}`
		if r := srv.Do("POST", "/agents", body(deep)); r.Status != 400 || r.ErrorCode() != "invalid_ir" {
			t.Fatalf("deep JSON: %d %s", r.Status, r.Body)
		}
		inner := `{"nodes":[{"id":"o","kind":"output"}]}`
		for range graph.MaxBodyNesting + 2 {
			inner = `{"nodes":[{"id":"l","kind":"loop","maxIterations":1,"until":"true","body":` + inner + `},{"id":"o","kind":"output"}],"edges":[{"source":"l","target":"o"}]}`
		}
		deepBodies := `{"id":"deep2",` + inner[1:]
		if r := srv.Do("POST", "/agents", body(deepBodies)); r.Status != 400 || r.ErrorCode() != "invalid_ir" {
			t.Fatalf("deep bodies: %d %s", r.Status, r.Body)
		}
		if r := srv.Do("GET", "/agents", nil); !strings.Contains(string(r.Body), `"agents":[]`) {
			t.Fatalf("something stored: %s", r.Body)
		}
	})
}

func TestConcurrentPublishSameVersion(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv, _ := setup(t, db)
		srv.Do("POST", "/agents", body(greeter))
		var wg sync.WaitGroup
		statuses := make([]int, 6)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := srv.Do("POST", "/agents/greeter/versions", body(rep(greeter, "Hello", "Hi", 1), `,"version":"2"`))
				statuses[i] = r.Status
			}()
		}
		wg.Wait()
		created := 0
		for _, s := range statuses {
			switch s {
			case 201:
				created++
			case 200:
			default:
				t.Fatalf("status %d in %v", s, statuses)
			}
		}
		if created != 1 {
			t.Fatalf("%d creations in %v", created, statuses)
		}
	})
}

func TestRedact(t *testing.T) {
	p := IOPolicy{IOCapture: CaptureFull, RedactRules: []RedactRule{
		{Path: "user.email"},
		{Path: "messages.*.content", Replacement: "-"},
		{Pattern: `sk-[A-Za-z0-9]+`},
	}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	in := map[string]any{
		"user":     map[string]any{"email": "a@b.c", "name": "Ada"},
		"messages": []any{map[string]any{"content": "hi"}, map[string]any{"content": "yo", "role": "user"}},
		"note":     "key sk-abc123 here",
	}
	out := p.Redact(in).(map[string]any)
	if out["user"].(map[string]any)["email"] != DefaultRedactReplacement || out["user"].(map[string]any)["name"] != "Ada" {
		t.Errorf("path rule: %v", out["user"])
	}
	if out["messages"].([]any)[1].(map[string]any)["content"] != "-" || out["messages"].([]any)[1].(map[string]any)["role"] != "user" {
		t.Errorf("wildcard rule: %v", out["messages"])
	}
	if out["note"] != "key [REDACTED] here" {
		t.Errorf("pattern rule: %v", out["note"])
	}
	if in["user"].(map[string]any)["email"] != "a@b.c" {
		t.Error("Redact modified its input")
	}
}

package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

func setup(t *testing.T, db *database.DB) *testkit.Server {
	t.Helper()
	svc, err := NewService(db)
	if err != nil {
		t.Fatal(err)
	}
	return testkit.New(t, testkit.Options{}, New(svc))
}

// step is one request of a scenario table and what it must answer.
type step struct {
	name         string
	method, path string
	body         any
	status       int
	code         string
	check        func(t *testing.T, m map[string]any)
}

func run(t *testing.T, srv *testkit.Server, steps []step) {
	t.Helper()
	for _, st := range steps {
		r := srv.Do(st.method, st.path, st.body)
		if r.Status != st.status || r.ErrorCode() != st.code {
			t.Fatalf("%s: %s %s → %d %q, want %d %q\n%s", st.name, st.method, st.path, r.Status, r.ErrorCode(), st.status, st.code, r.Body)
		}
		if r.Status >= 500 {
			t.Fatalf("%s: server error %s", st.name, r.Body)
		}
		if st.check != nil {
			st.check(t, r.Map(t))
		}
	}
}

const suiteBody = `{"id":"qa-golden","name":"QA golden","description":"three questions","cases":[
  {"id":"q1","input":{"question":"2+2?"},"expected":"4","tags":["math"]},
  {"id":"q2","input":"capital of France?","expected":{"answer":"Paris"}},
  {"id":"q3","input":[1,2,3]}]}`

func TestRecordScenarios(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv := setup(t, db)
		if r := srv.Do("POST", "/bench/suites", suiteBody); r.Status != 201 {
			t.Fatalf("suite: %d %s", r.Status, r.Body)
		}
		run(t, srv, []step{
			{"full result", "POST", "/bench/runs", `{"logical_id":"llama-3-8b","agent_id":"greeter","suite_id":"qa-golden","case_id":"q1","preset":"greedy","params":{"temperature":0},"metrics":{"accuracy":0.75,"latency_ms":120.5},"labels":{"gpu":"none","commit":"abc"},"notes":"first run"}`, 201, "", func(t *testing.T, m map[string]any) {
				if id, _ := m["id"].(string); !resultIDPattern.MatchString(id) {
					t.Errorf("id %v", m["id"])
				}
				if m["created_at"] == nil || m["logical_id"] != "llama-3-8b" || m["case_id"] != "q1" || m["preset"] != "greedy" || m["notes"] != "first run" {
					t.Errorf("result %v", m)
				}
				if mt := m["metrics"].(map[string]any); mt["accuracy"] != 0.75 || mt["latency_ms"] != 120.5 {
					t.Errorf("metrics %v", mt)
				}
				if p := m["params"].(map[string]any); p["temperature"] != 0.0 {
					t.Errorf("params %v", p)
				}
			}},
			{"minimal, agent only", "POST", "/bench/runs", `{"agent_id":"greeter","metrics":{"score":-3}}`, 201, "", func(t *testing.T, m map[string]any) {
				if m["logical_id"] != nil || m["params"] != nil || len(m["labels"].(map[string]any)) != 0 || m["notes"] != "" {
					t.Errorf("defaults %v", m)
				}
			}},
			{"extreme but finite", "POST", "/bench/runs", `{"logical_id":"m","metrics":{"big":1.7976931348623157e308,"tiny":5e-324}}`, 201, "", nil},
			{"no subject", "POST", "/bench/runs", `{"metrics":{"a":1}}`, 400, "invalid_request", nil},
			{"empty logical id", "POST", "/bench/runs", `{"logical_id":"","metrics":{"a":1}}`, 400, "invalid_request", nil},
			{"logical id with spaces", "POST", "/bench/runs", `{"logical_id":" m ","metrics":{"a":1}}`, 400, "invalid_request", nil},
			{"logical id with NUL", "POST", "/bench/runs", `{"logical_id":"m\u0000x","metrics":{"a":1}}`, 400, "invalid_request", nil},
			{"logical id too long", "POST", "/bench/runs", `{"logical_id":"` + strings.Repeat("m", 201) + `","metrics":{"a":1}}`, 400, "invalid_request", nil},
			{"logical id a number", "POST", "/bench/runs", `{"logical_id":7,"metrics":{"a":1}}`, 400, "invalid_request", nil},
			{"metrics missing", "POST", "/bench/runs", `{"agent_id":"a"}`, 400, "invalid_request", nil},
			{"metrics empty", "POST", "/bench/runs", `{"agent_id":"a","metrics":{}}`, 400, "invalid_request", nil},
			{"metrics not an object", "POST", "/bench/runs", `{"agent_id":"a","metrics":[1]}`, 400, "invalid_request", nil},
			{"metric null", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":null}}`, 400, "invalid_request", nil},
			{"metric a string", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":"1"}}`, 400, "invalid_request", nil},
			{"metric NaN", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":NaN}}`, 400, "invalid_request", nil},
			{"metric overflows", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":1e999}}`, 400, "invalid_request", nil},
			{"metric name blank", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"":1}}`, 400, "invalid_request", nil},
			{"metric name control", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a\nb":1}}`, 400, "invalid_request", nil},
			{"too many metrics", "POST", "/bench/runs", `{"agent_id":"a","metrics":{` + manyMetrics(maxMetrics+1) + `}}`, 400, "invalid_request", nil},
			{"params not an object", "POST", "/bench/runs", `{"agent_id":"a","params":[1],"metrics":{"a":1}}`, 400, "invalid_request", nil},
			{"params invalid UTF-8", "POST", "/bench/runs", "{\"agent_id\":\"a\",\"params\":{\"k\":\"\xff\"},\"metrics\":{\"a\":1}}", 400, "invalid_request", nil},
			{"label value null", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":1},"labels":{"k":null}}`, 400, "invalid_request", nil},
			{"label value number", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":1},"labels":{"k":1}}`, 400, "invalid_request", nil},
			{"label key bad", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":1},"labels":{"a b":"x"}}`, 400, "invalid_request", nil},
			{"notes control", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":1},"notes":"x\u0007"}`, 400, "invalid_request", nil},
			{"preset bad name", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":1},"preset":"../x"}`, 400, "invalid_request", nil},
			{"case without suite", "POST", "/bench/runs", `{"agent_id":"a","case_id":"q1","metrics":{"a":1}}`, 400, "invalid_request", nil},
			{"unknown suite", "POST", "/bench/runs", `{"agent_id":"a","suite_id":"nope","metrics":{"a":1}}`, 404, "suite_not_found", nil},
			{"unknown case", "POST", "/bench/runs", `{"agent_id":"a","suite_id":"qa-golden","case_id":"q9","metrics":{"a":1}}`, 404, "case_not_found", nil},
			{"unknown field", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":1},"metric":{}}`, 400, "invalid_request", nil},
			{"malformed", "POST", "/bench/runs", `{"agent_id":`, 400, "invalid_request", nil},
			{"empty body", "POST", "/bench/runs", ``, 400, "invalid_request", nil},
			{"trailing data", "POST", "/bench/runs", `{"agent_id":"a","metrics":{"a":1}} {}`, 400, "invalid_request", nil},
			{"not an object", "POST", "/bench/runs", `[]`, 400, "invalid_request", nil},
			{"update", "PUT", "/bench/runs", `{}`, 405, "method_not_allowed", nil},
		})
		// Only the three valid results were stored.
		var page ResultPage
		srv.Do("GET", "/bench/runs", nil).JSON(t, &page)
		if len(page.Results) != 3 || page.Next != "" {
			t.Fatalf("stored %d results: %+v", len(page.Results), page)
		}
		if page.Results[2].CaseID == nil || *page.Results[2].CaseID != "q1" {
			t.Fatalf("newest first: %+v", page.Results)
		}
		// A result reads back as it was recorded.
		first := page.Results[2]
		var got Result
		r := srv.Do("GET", "/bench/runs/"+first.ID, nil)
		r.JSON(t, &got)
		if r.Status != 200 || got.ID != first.ID || got.Labels["commit"] != "abc" || !got.CreatedAt.Equal(first.CreatedAt) {
			t.Fatalf("get: %d %s", r.Status, r.Body)
		}
		// The POST answer and later reads agree, created_at included.
		var posted, read Result
		srv.Do("POST", "/bench/runs", `{"agent_id":"a","metrics":{"x":1}}`).JSON(t, &posted)
		srv.Do("GET", "/bench/runs/"+posted.ID, nil).JSON(t, &read)
		if pj, _ := json.Marshal(posted); string(pj) != string(mustJSON(t, read)) {
			t.Fatalf("posted %s, read %+v", pj, read)
		}
		for _, id := range []string{"bres_00000000000000000000000000000000", "nope"} {
			if r := srv.Do("GET", "/bench/runs/"+id, nil); r.Status != 404 || r.ErrorCode() != "bench_result_not_found" {
				t.Errorf("%s: %d %s", id, r.Status, r.Body)
			}
		}
		// Control characters and invalid UTF-8 in the URL are refused by the shared stack.
		for _, id := range []string{"bres_%00", "%ff"} {
			if r := srv.Do("GET", "/bench/runs/"+id, nil); r.Status != 400 || r.ErrorCode() != "invalid_request" {
				t.Errorf("%s: %d %s", id, r.Status, r.Body)
			}
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func manyMetrics(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"m%d":%d`, i, i)
	}
	return strings.Join(parts, ",")
}

func record(t *testing.T, srv *testkit.Server, body string) string {
	t.Helper()
	r := srv.Do("POST", "/bench/runs", body)
	if r.Status != 201 {
		t.Fatalf("record %s: %d %s", body, r.Status, r.Body)
	}
	return r.Map(t)["id"].(string)
}

func TestListFiltersAndPaging(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv := setup(t, db)
		if r := srv.Do("POST", "/bench/suites", suiteBody); r.Status != 201 {
			t.Fatalf("suite: %d %s", r.Status, r.Body)
		}
		var ids []string // oldest first
		for i := range 7 {
			body := fmt.Sprintf(`{"logical_id":"m%d","agent_id":"ag%d","metrics":{"i":%d}`, i%2, i%3, i)
			if i >= 4 {
				body += fmt.Sprintf(`,"suite_id":"qa-golden","case_id":"q%d"`, i-3)
			}
			ids = append(ids, record(t, srv, body+"}"))
		}
		list := func(q string) []float64 {
			t.Helper()
			r := srv.Do("GET", "/bench/runs?"+q, nil)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", q, r.Status, r.Body)
			}
			var p ResultPage
			r.JSON(t, &p)
			var out []float64
			for _, res := range p.Results {
				out = append(out, res.Metrics["i"])
			}
			return out
		}
		for q, want := range map[string]string{
			"":                              "[6 5 4 3 2 1 0]",
			"logical_id=m0":                 "[6 4 2 0]",
			"agent_id=ag1":                  "[4 1]",
			"logical_id=m0&agent_id=ag0":    "[6 0]",
			"suite_id=qa-golden":            "[6 5 4]",
			"suite_id=qa-golden&case_id=q2": "[5]",
			"case_id=q3":                    "[6]",
			"logical_id=nope":               "[]",
			"logical_id=":                   "[6 5 4 3 2 1 0]",
			"unrelated=1":                   "[6 5 4 3 2 1 0]",
		} {
			got := list(q)
			if g := fmt.Sprint(got); g != want && !(want == "[]" && got == nil) {
				t.Errorf("%q: %s, want %s", q, g, want)
			}
		}
		// Paging: every result once, newest first, filters kept across pages.
		var seen []string
		path := "/bench/runs?limit=2&logical_id=m0"
		for range 10 {
			var p ResultPage
			r := srv.Do("GET", path, nil)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", path, r.Status, r.Body)
			}
			r.JSON(t, &p)
			for _, res := range p.Results {
				seen = append(seen, res.ID)
			}
			if p.Next == "" {
				break
			}
			path = "/bench/runs?limit=2&logical_id=m0&before=" + p.Next
		}
		if want := []string{ids[6], ids[4], ids[2], ids[0]}; fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("pages gave %v, want %v", seen, want)
		}
		badCursor := database.Cursor{At: page0Time(t, srv), ID: "x\x00y"}.Encode()
		for _, q := range []string{"limit=0", "limit=201", "limit=x", "limit=-1", "before=garbage", "before=" + badCursor, "agent_id=%00", "logical_id=%ff", "agent_id=" + strings.Repeat("a", 257)} {
			if r := srv.Do("GET", "/bench/runs?"+q, nil); r.Status != 400 || r.ErrorCode() != "invalid_request" {
				t.Errorf("%s: %d %s", q, r.Status, r.Body)
			}
		}
		if r := srv.Do("GET", "/bench/runs?limit=200", nil); r.Status != 200 {
			t.Errorf("limit=200: %d", r.Status)
		}
	})
}

func page0Time(t *testing.T, srv *testkit.Server) time.Time {
	t.Helper()
	var p ResultPage
	srv.Do("GET", "/bench/runs?limit=1", nil).JSON(t, &p)
	return p.Results[0].CreatedAt
}

func TestCompare(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv := setup(t, db)
		a := record(t, srv, `{"logical_id":"base","metrics":{"accuracy":0.5,"latency_ms":200,"zero":0,"only_a":1}}`)
		b := record(t, srv, `{"logical_id":"cand","metrics":{"accuracy":0.6,"latency_ms":150,"zero":2,"only_b":3}}`)
		huge := record(t, srv, `{"logical_id":"x","metrics":{"v":1.7976931348623157e308,"w":5e-324}}`)
		neg := record(t, srv, `{"logical_id":"y","metrics":{"v":-1.7976931348623157e308,"w":1e308}}`)
		var c Comparison
		r := srv.Do("GET", "/bench/compare?a="+a+"&b="+b, nil)
		if r.Status != 200 {
			t.Fatalf("compare: %d %s", r.Status, r.Body)
		}
		r.JSON(t, &c)
		if c.A.ID != a || c.B.ID != b || c.A.LogicalID == nil || *c.A.LogicalID != "base" {
			t.Fatalf("sides %+v %+v", c.A, c.B)
		}
		got := map[string]string{}
		var names []string
		for _, d := range c.Metrics {
			names = append(names, d.Name)
			got[d.Name] = fmt.Sprintf("%s %s %s %s", f(d.A), f(d.B), f(d.Delta), f(d.DeltaPct))
		}
		if fmt.Sprint(names) != "[accuracy latency_ms only_a only_b zero]" {
			t.Fatalf("names %v", names)
		}
		for n, want := range map[string]string{
			"accuracy":   "0.5 0.6 0.1 20",
			"latency_ms": "200 150 -50 -25",
			"only_a":     "1 null null null",
			"only_b":     "null 3 null null",
			"zero":       "0 2 2 null",
		} {
			if got[n] != want {
				t.Errorf("%s: %s, want %s", n, got[n], want)
			}
		}
		// The raw answer has explicit nulls and snake_case keys.
		if !strings.Contains(string(r.Body), `"name":"only_a","a":1,"b":null,"delta":null,"delta_pct":null`) {
			t.Errorf("body %s", r.Body)
		}
		// Overflowing deltas are null, never a failed answer.
		r = srv.Do("GET", "/bench/compare?a="+neg+"&b="+huge, nil)
		r.JSON(t, &c)
		if r.Status != 200 || c.Metrics[0].Delta != nil || c.Metrics[0].DeltaPct != nil || c.Metrics[1].DeltaPct == nil {
			t.Fatalf("overflow: %d %s", r.Status, r.Body)
		}
		r = srv.Do("GET", "/bench/compare?a="+huge+"&b="+neg, nil)
		if r.Status != 200 {
			t.Fatalf("overflow reversed: %d %s", r.Status, r.Body)
		}
		// Self-comparison is all zeros.
		r = srv.Do("GET", "/bench/compare?a="+a+"&b="+a, nil)
		r.JSON(t, &c)
		for _, d := range c.Metrics {
			if d.Delta == nil || *d.Delta != 0 {
				t.Errorf("self %s: %s", d.Name, f(d.Delta))
			}
		}
		missing := "bres_ffffffffffffffffffffffffffffffff"
		for _, tt := range []struct {
			q      string
			status int
			code   string
			field  string
		}{
			{"", 400, "invalid_request", "a"},
			{"a=" + a, 400, "invalid_request", "b"},
			{"b=" + b, 400, "invalid_request", "a"},
			{"a=&b=" + b, 400, "invalid_request", "a"},
			{"a=" + missing + "&b=" + b, 404, "bench_result_not_found", "a"},
			{"a=" + a + "&b=" + missing, 404, "bench_result_not_found", "b"},
			{"a=" + a + "&b=nope", 404, "bench_result_not_found", "b"},
		} {
			r := srv.Do("GET", "/bench/compare?"+tt.q, nil)
			if r.Status != tt.status || r.ErrorCode() != tt.code {
				t.Errorf("%q: %d %s", tt.q, r.Status, r.Body)
				continue
			}
			var env struct {
				Error struct {
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			r.JSON(t, &env)
			if env.Error.Details["field"] != tt.field {
				t.Errorf("%q: details %v, want field %s", tt.q, env.Error.Details, tt.field)
			}
		}
	})
}

func f(v *float64) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprint(math.Round(*v*1e9) / 1e9)
}

func TestPresets(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv := setup(t, db)
		run(t, srv, []step{
			{"create", "POST", "/bench/presets", `{"name":"greedy","params":{"temperature":0,"top_p":1},"description":"deterministic"}`, 201, "", func(t *testing.T, m map[string]any) {
				if m["name"] != "greedy" || m["description"] != "deterministic" || m["created_at"] == nil || m["params"].(map[string]any)["top_p"] != 1.0 {
					t.Errorf("preset %v", m)
				}
			}},
			{"second", "POST", "/bench/presets", `{"name":"creative.v2","params":{}}`, 201, "", nil},
			{"duplicate", "POST", "/bench/presets", `{"name":"greedy","params":{"temperature":1}}`, 409, "preset_exists", nil},
			{"no name", "POST", "/bench/presets", `{"params":{}}`, 400, "invalid_request", nil},
			{"bad name", "POST", "/bench/presets", `{"name":"a/b","params":{}}`, 400, "invalid_request", nil},
			{"empty name", "POST", "/bench/presets", `{"name":"","params":{}}`, 400, "invalid_request", nil},
			{"no params", "POST", "/bench/presets", `{"name":"x"}`, 400, "invalid_request", nil},
			{"null params", "POST", "/bench/presets", `{"name":"x","params":null}`, 400, "invalid_request", nil},
			{"params a list", "POST", "/bench/presets", `{"name":"x","params":[]}`, 400, "invalid_request", nil},
			{"params a string", "POST", "/bench/presets", `{"name":"x","params":"t=0"}`, 400, "invalid_request", nil},
			{"description control", "POST", "/bench/presets", `{"name":"x","params":{},"description":"\u0000"}`, 400, "invalid_request", nil},
			{"unknown field", "POST", "/bench/presets", `{"name":"x","params":{},"desc":""}`, 400, "invalid_request", nil},
			{"get", "GET", "/bench/presets/greedy", nil, 200, "", func(t *testing.T, m map[string]any) {
				if m["params"].(map[string]any)["temperature"] != 0.0 {
					t.Errorf("duplicate overwrote: %v", m)
				}
			}},
			{"list", "GET", "/bench/presets", nil, 200, "", func(t *testing.T, m map[string]any) {
				ps := m["presets"].([]any)
				if len(ps) != 2 || ps[0].(map[string]any)["name"] != "creative.v2" {
					t.Errorf("presets %v", ps)
				}
			}},
			{"list bad limit", "GET", "/bench/presets?limit=500", nil, 400, "invalid_request", nil},
			{"list bad cursor", "GET", "/bench/presets?before=zz", nil, 400, "invalid_request", nil},
			{"delete", "DELETE", "/bench/presets/greedy", nil, 204, "", nil},
			{"delete again", "DELETE", "/bench/presets/greedy", nil, 404, "preset_not_found", nil},
			{"delete bad name", "DELETE", "/bench/presets/..%2f..", nil, 404, "preset_not_found", nil},
			{"get deleted", "GET", "/bench/presets/greedy", nil, 404, "preset_not_found", nil},
			{"recreate", "POST", "/bench/presets", `{"name":"greedy","params":{"temperature":0.1}}`, 201, "", nil},
		})
		// Paging.
		for i := range 5 {
			if r := srv.Do("POST", "/bench/presets", fmt.Sprintf(`{"name":"p%d","params":{"i":%d}}`, i, i)); r.Status != 201 {
				t.Fatal(r.Status)
			}
		}
		var names []string
		path := "/bench/presets?limit=3"
		for range 10 {
			var p PresetPage
			srv.Do("GET", path, nil).JSON(t, &p)
			for _, x := range p.Presets {
				names = append(names, x.Name)
			}
			if p.Next == "" {
				break
			}
			path = "/bench/presets?limit=3&before=" + p.Next
		}
		if fmt.Sprint(names) != "[p4 p3 p2 p1 p0 greedy creative.v2]" {
			t.Fatalf("pages %v", names)
		}
	})
}

func TestSuites(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv := setup(t, db)
		run(t, srv, []step{
			{"create", "POST", "/bench/suites", suiteBody, 201, "", func(t *testing.T, m map[string]any) {
				if m["id"] != "qa-golden" || m["case_count"] != 3.0 || m["cases"] != nil {
					t.Errorf("suite %v", m)
				}
			}},
			{"minted id", "POST", "/bench/suites", `{"name":"anon","cases":[{"id":"c","input":"x"}]}`, 201, "", func(t *testing.T, m map[string]any) {
				if id, _ := m["id"].(string); !strings.HasPrefix(id, suiteIDPrefix) || !identPattern.MatchString(id) {
					t.Errorf("id %v", m["id"])
				}
			}},
			{"duplicate id", "POST", "/bench/suites", suiteBody, 409, "suite_exists", nil},
			{"duplicate case id", "POST", "/bench/suites", `{"name":"d","cases":[{"id":"a","input":1},{"id":"b","input":2},{"id":"a","input":3}]}`, 400, "duplicate_case_id", func(t *testing.T, m map[string]any) {
				if d := m["error"].(map[string]any)["details"].(map[string]any); d["field"] != "cases[2].id" {
					t.Errorf("details %v", d)
				}
			}},
			{"no name", "POST", "/bench/suites", `{"cases":[{"id":"a","input":1}]}`, 400, "invalid_request", nil},
			{"blank name", "POST", "/bench/suites", `{"name":"  ","cases":[{"id":"a","input":1}]}`, 400, "invalid_request", nil},
			{"bad id", "POST", "/bench/suites", `{"id":"a b","name":"n","cases":[{"id":"a","input":1}]}`, 400, "invalid_request", nil},
			{"no cases", "POST", "/bench/suites", `{"name":"n"}`, 400, "invalid_request", nil},
			{"empty cases", "POST", "/bench/suites", `{"name":"n","cases":[]}`, 400, "invalid_request", nil},
			{"case without id", "POST", "/bench/suites", `{"name":"n","cases":[{"input":1}]}`, 400, "invalid_request", nil},
			{"case bad id", "POST", "/bench/suites", `{"name":"n","cases":[{"id":"../a","input":1}]}`, 400, "invalid_request", nil},
			{"case without input", "POST", "/bench/suites", `{"name":"n","cases":[{"id":"a"}]}`, 400, "invalid_request", nil},
			{"case null input", "POST", "/bench/suites", `{"name":"n","cases":[{"id":"a","input":null}]}`, 400, "invalid_request", nil},
			{"case invalid UTF-8", "POST", "/bench/suites", "{\"name\":\"n\",\"cases\":[{\"id\":\"a\",\"input\":\"\xfe\"}]}", 400, "invalid_request", nil},
			{"case a string", "POST", "/bench/suites", `{"name":"n","cases":["a"]}`, 400, "invalid_request", nil},
			{"tag null", "POST", "/bench/suites", `{"name":"n","cases":[{"id":"a","input":1,"tags":[null]}]}`, 400, "invalid_request", nil},
			{"tag empty", "POST", "/bench/suites", `{"name":"n","cases":[{"id":"a","input":1,"tags":[""]}]}`, 400, "invalid_request", nil},
			{"tags not a list", "POST", "/bench/suites", `{"name":"n","cases":[{"id":"a","input":1,"tags":"x"}]}`, 400, "invalid_request", nil},
			{"unknown case field", "POST", "/bench/suites", `{"name":"n","cases":[{"id":"a","input":1,"output":2}]}`, 400, "invalid_request", nil},
			{"unknown", "GET", "/bench/suites/nope", nil, 404, "suite_not_found", nil},
			{"unknown escaped", "GET", "/bench/suites/%2e%2e", nil, 404, "suite_not_found", nil},
			{"delete", "DELETE", "/bench/suites/qa-golden", nil, 405, "method_not_allowed", nil},
			{"list", "GET", "/bench/suites", nil, 200, "", func(t *testing.T, m map[string]any) {
				ss := m["suites"].([]any)
				if len(ss) != 2 || ss[1].(map[string]any)["id"] != "qa-golden" || ss[1].(map[string]any)["case_count"] != 3.0 || ss[1].(map[string]any)["cases"] != nil {
					t.Errorf("suites %v", ss)
				}
			}},
			{"list bad limit", "GET", "/bench/suites?limit=0", nil, 400, "invalid_request", nil},
		})
		// Cases come back in submitted order, input and expected as sent, compacted.
		r := srv.Do("GET", "/bench/suites/qa-golden", nil)
		want := `"cases":[{"id":"q1","input":{"question":"2+2?"},"expected":"4","tags":["math"]},{"id":"q2","input":"capital of France?","expected":{"answer":"Paris"},"tags":[]},{"id":"q3","input":[1,2,3],"tags":[]}]`
		if m := r.Map(t); r.Status != 200 || m["name"] != "QA golden" || m["description"] != "three questions" || !strings.Contains(string(r.Body), want) {
			t.Fatalf("suite %d %s", r.Status, r.Body)
		}
	})
}

func TestSuiteBounds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv := setup(t, db)
		build := func(id string, n int) string {
			var b strings.Builder
			fmt.Fprintf(&b, `{"id":%q,"name":"big","cases":[`, id)
			for i := range n {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"id":"c%d","input":%d}`, i, i)
			}
			b.WriteString("]}")
			return b.String()
		}
		if r := srv.Do("POST", "/bench/suites", build("too-big", maxCases+1)); r.Status != 400 || r.ErrorCode() != "invalid_request" {
			t.Fatalf("over the bound: %d %s", r.Status, r.Body)
		}
		if r := srv.Do("POST", "/bench/suites", build("full", maxCases)); r.Status != 201 {
			t.Fatalf("at the bound: %d %s", r.Status, r.Body)
		}
		var s Suite
		srv.Do("GET", "/bench/suites/full", nil).JSON(t, &s)
		if s.CaseCount != maxCases || len(s.Cases) != maxCases || s.Cases[maxCases-1].ID != fmt.Sprintf("c%d", maxCases-1) {
			t.Fatalf("stored %d/%d cases", s.CaseCount, len(s.Cases))
		}
		// A failing duplicate late in a large suite stores nothing: the batches are one transaction.
		dup := strings.Replace(build("dup", 1200), `{"id":"c1100"`, `{"id":"c0"`, 1)
		if r := srv.Do("POST", "/bench/suites", dup); r.Status != 400 || r.ErrorCode() != "duplicate_case_id" {
			t.Fatalf("dup: %d %s", r.Status, r.Body)
		}
		if r := srv.Do("GET", "/bench/suites/too-big", nil); r.Status != 404 {
			t.Fatalf("too-big stored: %d", r.Status)
		}
		if r := srv.Do("GET", "/bench/suites/dup", nil); r.Status != 404 {
			t.Fatalf("dup stored: %d", r.Status)
		}
	})
}

package bench

import (
	"encoding/json"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/svc-dev/svc/platform/httpx"
)

// FuzzRecordInput feeds untrusted POST /bench/runs bodies through the decoder and validator:
// nothing panics, and whatever is accepted is storable (valid UTF-8, finite, re-readable).
func FuzzRecordInput(f *testing.F) {
	for _, s := range []string{
		`{"logical_id":"m","metrics":{"a":1}}`,
		`{"agent_id":"g","suite_id":"s","case_id":"c","preset":"p","params":{"t":0},"metrics":{"x":-1.5e300},"labels":{"k":"v"},"notes":"n\n"}`,
		`{"agent_id":"g","metrics":{"a":null}}`,
		`{"agent_id":"g","metrics":{"a\u0000":1}}`,
		"{\"agent_id\":\"g\",\"params\":{\"k\":\"\xff\"},\"metrics\":{\"a\":1}}",
		`{"agent_id":"","metrics":{"a":1e999}}`,
		`{"agent_id":"g","metrics":{"a":1},"labels":{"k":null}}`,
		`[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var in RecordInput
		if err := httpx.DecodeJSON(raw, &in, true); err != nil {
			return
		}
		row, err := checkRecord(in)
		if err != nil {
			return
		}
		if row.LogicalID == nil && row.AgentID == nil {
			t.Fatal("accepted without a subject")
		}
		for _, s := range []*string{row.LogicalID, row.AgentID, row.SuiteID, row.CaseID, row.Preset, row.Params, row.Labels, &row.Metrics, &row.Notes} {
			if s != nil && (!utf8.ValidString(*s) || containsNUL(*s)) {
				t.Fatalf("accepted text PostgreSQL refuses: %q", *s)
			}
		}
		row.ID = "bres_00000000000000000000000000000000"
		res, err := resultOf(row)
		if err != nil {
			t.Fatalf("stored form does not read back: %v", err)
		}
		if len(res.Metrics) == 0 {
			t.Fatal("accepted without metrics")
		}
		for _, v := range res.Metrics {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("non-finite metric %v", v)
			}
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("result does not encode: %v", err)
		}
	})
}

// FuzzSuiteInput does the same for POST /bench/suites bodies.
func FuzzSuiteInput(f *testing.F) {
	for _, s := range []string{
		suiteBody,
		`{"name":"n","cases":[{"id":"a","input":1},{"id":"a","input":2}]}`,
		`{"name":"n","cases":[{"id":"a","input":null,"tags":[null]}]}`,
		"{\"name\":\"n\",\"cases\":[{\"id\":\"a\",\"input\":\"\xfe\"}]}",
		`{"name":"\u0000","cases":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var in SuiteInput
		if err := httpx.DecodeJSON(raw, &in, true); err != nil {
			return
		}
		s, cases, err := checkSuite(in)
		if err != nil {
			return
		}
		if s.CaseCount != len(cases) || len(cases) == 0 || len(cases) > maxCases {
			t.Fatalf("case count %d for %d cases", s.CaseCount, len(cases))
		}
		seen := map[string]bool{}
		for _, c := range cases {
			if seen[c.CaseID] {
				t.Fatalf("duplicate case %q accepted", c.CaseID)
			}
			seen[c.CaseID] = true
			for _, v := range []*string{&c.Input, c.Expected, &c.Tags, &s.Name, &s.Description} {
				if v != nil && (!utf8.ValidString(*v) || containsNUL(*v)) {
					t.Fatalf("accepted text PostgreSQL refuses: %q", *v)
				}
			}
			if !json.Valid([]byte(c.Input)) || (c.Expected != nil && !json.Valid([]byte(*c.Expected))) {
				t.Fatalf("stored JSON invalid: %s", c.Input)
			}
		}
	})
}

// FuzzCompareMetrics checks that any pair of finite values gives an encodable comparison.
func FuzzCompareMetrics(f *testing.F) {
	f.Add(0.5, 0.6)
	f.Add(0.0, 2.0)
	f.Add(-math.MaxFloat64, math.MaxFloat64)
	f.Add(5e-324, math.MaxFloat64)
	f.Fuzz(func(t *testing.T, a, b float64) {
		if math.IsNaN(a) || math.IsInf(a, 0) || math.IsNaN(b) || math.IsInf(b, 0) {
			return
		}
		ds := compareMetrics(map[string]float64{"m": a, "x": a}, map[string]float64{"m": b, "y": b})
		if len(ds) != 3 || ds[0].Name != "m" || ds[1].B != nil || ds[2].A != nil {
			t.Fatalf("shape %+v", ds)
		}
		if _, err := json.Marshal(ds); err != nil {
			t.Fatalf("%v vs %v: %v", a, b, err)
		}
		if a == 0 && ds[0].DeltaPct != nil {
			t.Fatal("delta_pct against 0")
		}
	})
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

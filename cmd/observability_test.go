package cmd

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc-dev/svc/platform/testkit"
)

// TestObservabilityThroughTheControlPlane runs agents through the real control plane and reads
// their traces, their captured I/O under the agent's policy (with the agents module's redact
// rules) and the metrics.
func TestObservabilityThroughTheControlPlane(t *testing.T) {
	d := testDeps(t)
	p, err := buildControl(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.echo)
	defer srv.Close()
	do := func(method, path string, body any) *testkit.Response {
		return testkit.Do(t, srv.URL, method, path, body)
	}

	ir := json.RawMessage(`{"id":"greeter","nodes":[
	  {"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name, key: $in.in.key}"},
	  {"id":"out","kind":"output","value":"$in.in.greeting"}],
	 "edges":[{"source":"shape","target":"out"}]}`)
	if r := do("POST", "/agents", map[string]any{"ir": ir}); r.Status != 201 {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	policy := map[string]any{"io_capture": "full", "redact_rules": []map[string]any{{"pattern": `sk-[a-z0-9]+`}, {"path": "in.name"}}}
	if r := do("PUT", "/agents/greeter/io-policy", policy); r.Status != 200 {
		t.Fatalf("policy: %d %s", r.Status, r.Body)
	}
	r := do("POST", "/agents/greeter/runs", map[string]any{"input": map[string]any{"name": "Ada Lovelace", "key": "sk-abc123"}, "stream": false})
	if r.Status != 200 {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	var res struct {
		RunID  string `json:"runId"`
		Status string `json:"status"`
	}
	r.JSON(t, &res)
	if res.Status != "completed" || res.RunID == "" {
		t.Fatalf("run result: %s", r.Body)
	}

	r = do("GET", "/runs/"+res.RunID+"/trace", nil)
	if r.Status != 200 {
		t.Fatalf("trace: %d %s", r.Status, r.Body)
	}
	var tr struct {
		Status string `json:"status"`
		Root   struct {
			Kind     string `json:"kind"`
			Children []struct {
				NodeID string `json:"node_id"`
				Status string `json:"status"`
			} `json:"children"`
		} `json:"root"`
	}
	r.JSON(t, &tr)
	if tr.Status != "ok" || tr.Root.Kind != "run" || len(tr.Root.Children) != 2 || tr.Root.Children[0].NodeID != "shape" {
		t.Fatalf("trace: %s", r.Body)
	}

	r = do("GET", "/runs/"+res.RunID+"/nodes/shape/io", nil)
	if r.Status != 200 {
		t.Fatalf("io: %d %s", r.Status, r.Body)
	}
	body := string(r.Body)
	// The path rule hides the input field; the pattern rule hides the key wherever it appears.
	if !strings.Contains(body, `"captured":true`) || strings.Contains(body, "sk-abc123") || !strings.Contains(body, `"name":"[REDACTED]"`) || !strings.Contains(body, "Hello, Ada Lovelace") {
		t.Fatalf("io: %s", body)
	}
	var stored int64
	if err := d.db.Table("trace_node_io").Where("input LIKE ? OR output LIKE ? OR input LIKE ? OR output LIKE ?", "%sk-abc123%", "%sk-abc123%", "%\"name\":\"Ada%", "%\"name\":\"Ada%").Count(&stored).Error; err != nil || stored != 0 {
		t.Fatalf("redacted values stored: %d %v", stored, err)
	}
	if r := do("GET", "/runs/run_missing/trace", nil); r.Status != 404 || r.ErrorCode() != "run_not_found" {
		t.Fatalf("unknown run: %d %s", r.Status, r.Body)
	}

	r = do("GET", "/metrics", nil)
	if r.Status != 200 {
		t.Fatalf("metrics: %d", r.Status)
	}
	for _, want := range []string{
		`svc_runs_total{status="completed"} 1`,
		`svc_node_duration_seconds_count{kind="transform",status="ok"} 1`,
		`svc_http_requests_total{method="POST",plane="control",route="/agents/:id/runs",status="200"} 1`,
		`svc_http_requests_total{method="GET",plane="control",route="/runs/:id/trace",status="404"} 1`,
	} {
		if !strings.Contains(string(r.Body), want) {
			t.Fatalf("metrics lack %s:\n%s", want, grepLines(string(r.Body), "svc_"))
		}
	}
}

// TestInferenceMetrics: the inference plane serves /metrics with its request series and the
// resident engines gauge.
func TestInferenceMetrics(t *testing.T) {
	d := testDeps(t)
	p, err := buildInference(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.echo)
	defer srv.Close()
	if r := testkit.Do(t, srv.URL, "GET", "/v1/models", nil); r.Status != 200 {
		t.Fatalf("models: %d %s", r.Status, r.Body)
	}
	r := testkit.Do(t, srv.URL, "GET", "/metrics", nil)
	for _, want := range []string{
		`svc_http_requests_total{method="GET",plane="inference",route="/v1/models",status="200"} 1`,
		`svc_engines_resident 0`,
	} {
		if !strings.Contains(string(r.Body), want) {
			t.Fatalf("metrics lack %s:\n%s", want, grepLines(string(r.Body), "svc_"))
		}
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

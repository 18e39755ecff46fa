package runs_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

// startBinary runs `svc serve all` on the given data dir and database.
func startBinary(t *testing.T, dataDir, dbURL, control, inference string, env ...string) *testkit.Proc {
	t.Helper()
	p := testkit.Start(t, append([]string{
		"SERVICE_DATA_DIR=" + dataDir,
		"SERVICE_DATABASE_URL=" + dbURL,
		"SERVICE_CONTROL_ADDR=" + control,
		"SERVICE_INFERENCE_ADDR=" + inference,
		"SERVICE_INFERENCE_URL=http://" + inference,
		"SERVICE_INVOKE_TOKEN=",
		"SERVICE_LOG_LEVEL=warn",
	}, env...), "serve", "all")
	p.WaitHTTP(t, "http://"+control+"/readyz", 200, 30*time.Second)
	return p
}

// Kill a real control plane while a run is in flight (a tool node blocked on a local HTTP
// server, a prompt run blocked on the model), restart it on the same database: once the
// killed process's leases expire (SERVICE_RUN_LEASE, short here) the sweep has failed both
// runs with the interrupted error, and a fresh run works.
func TestSweepAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(dialect, func(t *testing.T) {
			dbURL := ""
			if dialect == database.Postgres {
				dbURL = dbtest.URL(t)
			}
			hit := make(chan struct{}, 1)
			block := make(chan struct{})
			tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hit <- struct{}{}
				select {
				case <-block:
				case <-r.Context().Done():
				}
			}))
			defer tool.Close()
			defer close(block)
			up := newUpstream(t)

			dataDir := t.TempDir()
			control, inference := testkit.FreeAddr(t), testkit.FreeAddr(t)
			base := "http://" + control
			lease := "SERVICE_RUN_LEASE=1s"
			p := startBinary(t, dataDir, dbURL, control, inference, lease)

			// A hosted-compatible model in the real inference plane, in front of the scripted upstream.
			if r := testkit.Do(t, "http://"+inference, "PUT", "/admin/models/slow", map[string]any{"binding": "hosted-compatible", "baseUrl": up.URL + "/v1", "model": "slow"}); r.Status/100 != 2 {
				t.Fatalf("register model: %d %s", r.Status, r.Body)
			}
			if r := testkit.Do(t, "http://"+inference, "PUT", "/admin/models/chat", map[string]any{"binding": "hosted-compatible", "baseUrl": up.URL + "/v1", "model": "echo"}); r.Status/100 != 2 {
				t.Fatalf("register model: %d %s", r.Status, r.Body)
			}

			ir := `{"nodes":[{"id":"call","kind":"tool","tool":{"type":"http","method":"GET","url":"` + tool.URL + `/slow"}},{"id":"out","kind":"output","value":"$in.in.status"}],"edges":[{"source":"call","target":"out"}]}`
			resp1, next1 := openStream(t, base+"/graphs/runs", map[string]any{"ir": json.RawMessage(ir), "input": map[string]any{}})
			defer resp1.Body.Close()
			graphRun := resp1.Header.Get("X-Run-Id")
			if f, ok := next1(); !ok || !strings.Contains(f.data, `"streaming"`) {
				t.Fatalf("graph run first frame %+v", f)
			}
			<-hit
			resp2, next2 := openStream(t, base+"/runs", map[string]any{"input": "a long story", "model": "slow"})
			defer resp2.Body.Close()
			promptRun := resp2.Header.Get("X-Run-Id")
			if f, ok := next2(); !ok || !strings.Contains(f.data, `"streaming"`) {
				t.Fatalf("prompt run first frame %+v", f)
			}
			<-up.started
			for _, id := range []string{graphRun, promptRun} {
				if r := testkit.Do(t, base, "GET", "/runs/"+id, nil).Map(t); r["status"] != "streaming" {
					t.Fatalf("before kill %v", r)
				}
			}

			p.Kill()
			startBinary(t, dataDir, dbURL, control, inference, lease)
			for _, id := range []string{graphRun, promptRun} {
				deadline := time.Now().Add(20 * time.Second)
				var rec map[string]any
				for time.Now().Before(deadline) {
					rec = testkit.Do(t, base, "GET", "/runs/"+id, nil).Map(t)
					if rec["status"] != "streaming" {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				e, _ := rec["error"].(map[string]any)
				if rec["status"] != "failed" || e["code"] != "interrupted" || e["message"] != "interrupted: control-plane restarted while run was in-flight" {
					t.Fatalf("after restart %v", rec)
				}
			}
			// The restarted plane runs prompts end to end.
			r := testkit.Do(t, base, "POST", "/runs", map[string]any{"input": "hi", "model": "chat", "stream": false})
			if r.Status != 200 || r.Map(t)["output"] != "echo: hi" {
				t.Fatalf("prompt after restart: %d %s", r.Status, r.Body)
			}
			if r := testkit.Do(t, base, "POST", "/runs", map[string]any{"input": "hi", "model": "llama-server"}); r.Status != 404 || r.ErrorCode() != "model_not_found" {
				t.Fatalf("unregistered model through the real plane: %d %s", r.Status, r.Body)
			}
		})
	}
}

// The composition root end to end: an agent published through the agents API runs through
// the runs API, invoke checks the token, and the CLI streams answers.
func TestAgentRunsAndCLIThroughBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	up := newUpstream(t)
	control, inference := testkit.FreeAddr(t), testkit.FreeAddr(t)
	base := "http://" + control
	startBinary(t, t.TempDir(), "", control, inference, "SERVICE_INVOKE_TOKEN=tok-123")
	if r := testkit.Do(t, "http://"+inference, "PUT", "/admin/models/chat", map[string]any{"binding": "hosted-compatible", "baseUrl": up.URL + "/v1", "model": "echo"}); r.Status/100 != 2 {
		t.Fatalf("register model: %d %s", r.Status, r.Body)
	}
	if r := testkit.Do(t, base, "POST", "/agents", map[string]any{"ir": json.RawMessage(greeter)}); r.Status != 201 {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	r := testkit.Do(t, base, "POST", "/agents/greeter/runs", map[string]any{"input": map[string]any{"name": "Ada"}, "stream": false})
	if r.Status != 200 || r.Map(t)["output"] != "Hello, Ada" {
		t.Fatalf("agent run: %d %s", r.Status, r.Body)
	}
	if r := testkit.Do(t, base, "POST", "/agents/greeter/runs", map[string]any{"version": "7"}); r.Status != 404 || r.ErrorCode() != "version_not_found" {
		t.Fatalf("unknown version: %d %s", r.Status, r.Body)
	}
	if r := testkit.Do(t, base, "POST", "/agents/greeter/invoke", map[string]any{"input": map[string]any{"name": "Bo"}}, "Authorization: Bearer nope"); r.Status != 401 {
		t.Fatalf("invoke wrong token: %d %s", r.Status, r.Body)
	}
	if r := testkit.Do(t, base, "POST", "/agents/greeter/invoke", map[string]any{"input": map[string]any{"name": "Bo"}}, "Authorization: Bearer tok-123"); r.Status != 200 || r.Map(t)["output"] != "Hello, Bo" {
		t.Fatalf("invoke: %d %s", r.Status, r.Body)
	}

	cli := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(testkit.Binary(t), append(args, "--control-url", base)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		_ = cmd.Run()
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}
	if out, errOut, code := cli("runs", "start", "greeter", "--input", `{"name":"Cy"}`); code != 0 || out != "Hello, Cy\n" || !strings.HasPrefix(errOut, "run run_") {
		t.Fatalf("cli agent run: %d %q %q", code, out, errOut)
	}
	if r := testkit.Do(t, base, "POST", "/sessions", map[string]any{"id": "cli"}); r.Status != 201 {
		t.Fatalf("session: %d", r.Status)
	}
	if out, errOut, code := cli("runs", "start", "--model", "chat", "--prompt", "hi there", "--session", "cli"); code != 0 || out != "echo: hi there\n" {
		t.Fatalf("cli prompt run: %d %q %q", code, out, errOut)
	}
	if out, errOut, code := cli("runs", "start", "greeter", "--input", `{}`); code != 1 || !strings.Contains(errOut, "transform_error") {
		t.Fatalf("cli failing run: %d %q %q", code, out, errOut)
	}
	if _, errOut, code := cli("runs", "start", "--model", "nope", "--prompt", "x"); code != 1 || !strings.Contains(errOut, "model_not_found") {
		t.Fatalf("cli unknown model: %d %q", code, errOut)
	}
	if out, _, code := cli("runs", "list", "--agent", "greeter"); code != 0 || strings.Count(out, "greeter@1") != 4 {
		t.Fatalf("cli list: %d %q", code, out)
	}
	if out, _, code := cli("sessions", "get", "cli"); code != 0 || !strings.Contains(out, `"echo: hi there"`) {
		t.Fatalf("cli session: %d %q", code, out)
	}
	if out, _, code := cli("sessions", "list"); code != 0 || !strings.Contains(out, "cli") {
		t.Fatalf("cli sessions list: %d %q", code, out)
	}
	if out, _, code := cli("runs", "start", "greeter", "--input", `{"name":"Di"}`, "--no-stream"); code != 0 || !strings.Contains(out, `"output": "Hello, Di"`) {
		t.Fatalf("cli no-stream: %d %q", code, out)
	}
}

package web

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/platform/testkit"
)

// chromium finds a headless-capable browser; CI machines without one skip the browser test.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// dumpDOM loads url in headless Chromium and returns the DOM after the page's scripts ran.
func dumpDOM(t *testing.T, browser, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", url).Output()
	if err != nil {
		t.Fatalf("chromium %s: %v", url, err)
	}
	return string(out)
}

// TestBrowserRendersAgentsAndRunTrace runs the real binary, publishes IR.md's greeter,
// runs it, and checks in a real browser that the agents page and the run's trace render
// from the API (the module scripts load, fetch and build the DOM).
func TestBrowserRendersAgentsAndRunTrace(t *testing.T) {
	browser := chromium()
	if browser == "" {
		t.Skip("no chromium on PATH")
	}
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	control, inference := testkit.FreeAddr(t), testkit.FreeAddr(t)
	p := testkit.Start(t, []string{
		"SERVICE_DATA_DIR=" + t.TempDir(),
		"SERVICE_CONTROL_ADDR=" + control,
		"SERVICE_INFERENCE_ADDR=" + inference,
		"SERVICE_INFERENCE_URL=http://" + inference,
		"SERVICE_LOG_LEVEL=warn",
	}, "serve", "all")
	base := "http://" + control
	p.WaitHTTP(t, base+"/agents", 200, 60*time.Second)

	greeter := `{"ir":{"id":"greeter","nodes":[{"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name}"},{"id":"out","kind":"output","value":"$in.in.greeting"}],"edges":[{"source":"shape","target":"out"}]}}`
	if r := testkit.Do(t, base, "POST", "/agents", greeter); r.Status != 201 {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	r := testkit.Do(t, base, "POST", "/agents/greeter/runs", `{"input":{"name":"Ada"},"stream":false}`)
	var run struct {
		RunID  string `json:"runId"`
		Output string `json:"output"`
	}
	if err := json.Unmarshal(r.Body, &run); err != nil || run.Output != "Hello, Ada" {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}

	agents := dumpDOM(t, browser, base+"/ui/#/agents")
	for _, want := range []string{`href="#/agents/greeter"`, "sha256:", `class="active"`} {
		if !strings.Contains(agents, want) {
			t.Fatalf("agents page lacks %q:\n%s", want, agents)
		}
	}
	detail := dumpDOM(t, browser, base+"/ui/#/runs/"+run.RunID)
	for _, want := range []string{"transform shape", "output out", "Hello, Ada", ">completed<"} {
		if !strings.Contains(detail, want) {
			t.Fatalf("run page lacks %q:\n%s", want, detail)
		}
	}
	if os.Getenv("UI_DUMP") != "" {
		t.Log(detail)
	}

	// Bench: two results compared per metric (b − a, percentage against a).
	var ids [2]string
	for i, body := range []string{
		`{"logical_id":"m","metrics":{"accuracy":0.5,"only_a":1}}`,
		`{"logical_id":"m","metrics":{"accuracy":0.6}}`,
	} {
		r := testkit.Do(t, base, "POST", "/bench/runs", body)
		var res struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(r.Body, &res); err != nil || r.Status != 201 {
			t.Fatalf("bench result: %d %s", r.Status, r.Body)
		}
		ids[i] = res.ID
	}
	compare := dumpDOM(t, browser, base+"/ui/#/bench/compare?a="+ids[0]+"&b="+ids[1])
	for _, want := range []string{"Per-metric deltas", ">accuracy<", ">+0.1<", ">+20.00%<", ">only_a<"} {
		if !strings.Contains(compare, want) {
			t.Fatalf("compare page lacks %q:\n%s", want, compare)
		}
	}

	// Tool servers: a header value is write-only, only its name is listed.
	if r := testkit.Do(t, base, "PUT", "/admin/mcp/servers/remote",
		`{"transport":"http","url":"http://127.0.0.1:1/mcp","headers":{"Authorization":"Bearer hunter2-token"}}`); r.Status != 201 {
		t.Fatalf("mcp register: %d %s", r.Status, r.Body)
	}
	mcp := dumpDOM(t, browser, base+"/ui/#/mcp")
	if !strings.Contains(mcp, "Authorization: ***") || !strings.Contains(mcp, ">remote<") || strings.Contains(mcp, "hunter2") {
		t.Fatalf("mcp page:\n%s", mcp)
	}
}

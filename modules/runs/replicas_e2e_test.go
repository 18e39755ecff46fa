package runs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

// Three real control-plane replicas on one PostgreSQL schema (DESIGN.md §9): a replica that
// starts while another executes a non-durable run leaves that run alone, and a client
// streaming the run's trace from a third replica sees its spans live, through LISTEN/NOTIFY,
// up to done.
func TestReplicasShareOnePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dbURL := dbtest.URL(t)
	hit := make(chan struct{}, 1)
	block := make(chan struct{})
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit <- struct{}{}
		select {
		case <-block:
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
		}
	}))
	defer tool.Close()
	unblocked := false
	defer func() {
		if !unblocked {
			close(block)
		}
	}()
	// Readiness needs an inference plane; no run here calls a model.
	inference := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer inference.Close()

	start := func() string {
		addr := testkit.FreeAddr(t)
		p := testkit.Start(t, []string{
			"SERVICE_DATA_DIR=" + t.TempDir(),
			"SERVICE_DATABASE_URL=" + dbURL,
			"SERVICE_CONTROL_ADDR=" + addr,
			"SERVICE_INFERENCE_URL=" + inference.URL,
			"SERVICE_INVOKE_TOKEN=",
			"SERVICE_LOG_LEVEL=warn",
		}, "serve", "control")
		p.WaitHTTP(t, "http://"+addr+"/readyz", 200, 30*time.Second)
		return "http://" + addr
	}
	a, b := start(), start()

	ir := `{"nodes":[{"id":"call","kind":"tool","tool":{"type":"http","method":"GET","url":"` + tool.URL + `/slow"}},{"id":"out","kind":"output","value":"$in.in.status"}],"edges":[{"source":"call","target":"out"}]}`
	resp, nextA := openStream(t, a+"/graphs/runs", map[string]any{"ir": json.RawMessage(ir), "input": map[string]any{}})
	defer resp.Body.Close()
	id := resp.Header.Get("X-Run-Id")
	if f, ok := nextA(); !ok || !strings.Contains(f.data, `"streaming"`) {
		t.Fatalf("first frame %+v", f)
	}
	<-hit

	// The trace stream on B: the subscription exists once the response headers are in.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b+"/runs/"+id+"/trace/stream", nil)
	trace, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer trace.Body.Close()
	if trace.StatusCode != 200 {
		t.Fatalf("trace stream on B: %d", trace.StatusCode)
	}

	// A third replica starts (and sweeps) while A executes: A's run is untouched.
	c := start()
	if r := testkit.Do(t, c, "GET", "/runs/"+id, nil).Map(t); r["status"] != "streaming" {
		t.Fatalf("A's run after C started: %v", r)
	}

	close(block)
	unblocked = true
	var final frame
	for {
		f, ok := nextA()
		if !ok {
			break
		}
		if f.event == "run" {
			final = f
		}
	}
	if !strings.Contains(final.data, `"completed"`) {
		t.Fatalf("A's run ended %+v", final)
	}

	// B saw the tool node's span close and the run's end live, without reconnecting.
	sc := bufio.NewScanner(trace.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var event string
	var closedCall bool
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := strings.TrimPrefix(line, "data: ")
			if event == "span.close" && strings.Contains(data, `"node_id":"call"`) && strings.Contains(data, `"status":"ok"`) {
				closedCall = true
			}
			if event == "done" {
				if !closedCall || !strings.Contains(data, `"status":"ok"`) || !strings.Contains(data, id) {
					t.Fatalf("done %s after call closed: %v", data, closedCall)
				}
				return
			}
		}
	}
	t.Fatalf("B's trace stream ended without done: %v", sc.Err())
}

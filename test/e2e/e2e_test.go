// Package e2e starts the real svc binary and checks it as a user would.
package e2e

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

func TestServeAllAnswersAndStopsCleanly(t *testing.T) {
	control, inference := testkit.FreeAddr(t), testkit.FreeAddr(t)
	p := testkit.Start(t, []string{
		"SERVICE_DATA_DIR=" + t.TempDir(),
		"SERVICE_CONTROL_ADDR=" + control,
		"SERVICE_INFERENCE_ADDR=" + inference,
		"SERVICE_INFERENCE_URL=http://" + inference,
		"SERVICE_DATABASE_URL=",
	}, "serve", "all")
	p.WaitHTTP(t, "http://"+control+"/readyz", 200, 20*time.Second)
	for _, base := range []string{"http://" + control, "http://" + inference} {
		r := testkit.Do(t, base, "GET", "/healthz", nil)
		if r.Status != 200 || r.Map(t)["status"] != "ok" {
			t.Fatalf("%s/healthz: %d %s", base, r.Status, r.Body)
		}
		r = testkit.Do(t, base, "GET", "/no/such/route", nil)
		if r.Status != 404 || r.ErrorCode() != "not_found" {
			t.Fatalf("%s 404 envelope: %d %s", base, r.Status, r.Body)
		}
		r = testkit.Do(t, base, "GET", "/openapi.json", nil)
		if r.Status != 200 || r.Map(t)["openapi"] == nil {
			t.Fatalf("%s/openapi.json: %d", base, r.Status)
		}
	}
	if r := testkit.Do(t, "http://"+inference, "GET", "/readyz", nil); r.Status != 200 {
		t.Fatalf("inference readyz: %d %s", r.Status, r.Body)
	}
	if code := p.Signal(t, syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, p.Output())
	}
}

func TestBadConfigExitsTwoNamingTheVariable(t *testing.T) {
	p := testkit.Start(t, []string{"SERVICE_MAX_RESIDENT=abc", "SERVICE_DATA_DIR=" + t.TempDir()}, "serve", "all")
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit")
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	out := strings.TrimSpace(p.Output())
	if strings.Count(out, "\n") != 0 || !strings.Contains(out, "SERVICE_MAX_RESIDENT") {
		t.Fatalf("want one line naming the variable, got %q", out)
	}
}

// flakyProxy forwards TCP to target while up, and drops connections while down.
type flakyProxy struct {
	ln     net.Listener
	target string
	up     atomic.Bool
}

func newFlakyProxy(t *testing.T, target string) *flakyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.up.Load() {
				c.Close()
				continue
			}
			go func(c net.Conn) {
				defer c.Close()
				u, err := net.Dial("tcp", p.target)
				if err != nil {
					return
				}
				defer u.Close()
				go io.Copy(u, c)
				io.Copy(c, u)
			}(c)
		}
	}()
	return p
}

func TestControlReadinessFollowsPostgres(t *testing.T) {
	pgURL := dbtest.URL(t) // skips without SERVICE_TEST_DATABASE_URL
	u, _ := url.Parse(pgURL)
	proxy := newFlakyProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()

	inference := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer inference.Close()
	control := testkit.FreeAddr(t)
	p := testkit.Start(t, []string{
		"SERVICE_DATA_DIR=" + t.TempDir(),
		"SERVICE_CONTROL_ADDR=" + control,
		"SERVICE_INFERENCE_URL=" + inference.URL,
		"SERVICE_DATABASE_URL=" + u.String(),
	}, "serve", "control")
	base := "http://" + control
	p.WaitHTTP(t, base+"/healthz", 200, 20*time.Second)
	r := testkit.Do(t, base, "GET", "/readyz", nil)
	if r.Status != 503 || r.ErrorCode() != "not_ready" || !strings.Contains(string(r.Body), `"database"`) {
		t.Fatalf("readyz with postgres down: %d %s", r.Status, r.Body)
	}
	if strings.Contains(string(r.Body), `"inference"],`) {
		t.Fatalf("inference wrongly reported down: %s", r.Body)
	}
	proxy.up.Store(true)
	p.WaitHTTP(t, base+"/readyz", 200, 30*time.Second)
	if code := p.Signal(t, syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }

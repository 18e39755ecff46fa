package testkit

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary builds the svc binary once per test process (shared by every test in it).
var binary = sync.OnceValues(func() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "svc-bin-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "svc")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return out, nil
})

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// Binary returns the path of the freshly built svc binary.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Proc is a running svc process.
type Proc struct {
	Cmd    *exec.Cmd
	mu     sync.Mutex
	output bytes.Buffer
	done   chan struct{}
	err    error
}

// Output returns what the process printed so far (stdout and stderr).
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

type lockedWriter struct{ p *Proc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.output.Write(b)
}

// Start runs the svc binary with args and extra environment ("K=V"); the process is
// killed when the test ends if still running.
func Start(t testing.TB, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = lockedWriter{p}
	cmd.Stderr = lockedWriter{p}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("svc output:\n%s", p.Output())
		}
	})
	return p
}

// Signal sends sig and waits (up to timeout) for the exit; it returns the exit code.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal, timeout time.Duration) int {
	t.Helper()
	_ = p.Cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("process did not exit within %s after %v", timeout, sig)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// WaitHTTP polls url until it answers want (any status when want is 0), the process
// exits, or the deadline passes.
func (p *Proc) WaitHTTP(t testing.TB, url string, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("process exited while waiting for %s: %v\n%s", url, p.err, p.Output())
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if want == 0 || resp.StatusCode == want {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not answer %d within %s\n%s", url, want, within, p.Output())
}

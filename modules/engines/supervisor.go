package engines

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/svc-dev/svc/modules/models"
)

// The supervisor: one run-loop goroutine (Service.loop) owns every resident process and
// the failure records. Other goroutines never touch that state; they post closures to the
// loop (Service.post) and wait for an answer on a channel of their own.

// proc is one supervised engine server. Its fields are the loop's, except exited (closed
// by the goroutine that reaps the process) and tail (locked).
type proc struct {
	id       string
	rev      int64
	engine   string
	pid      int
	port     int
	ready    bool
	stopping bool
	inFlight int
	lastUsed time.Time
	waiters  []chan leaseResult
	cancel   context.CancelFunc // ends the launch goroutine (start wait, health polling)
	exited   chan struct{}
	tail     *tailBuffer
}

// Lease is one request's hold on an engine: where to send it, and Release when done.
type Lease struct {
	// BaseURL is the engine's OpenAI-style base (…/v1).
	BaseURL string
	// Transport serves per-request engines in-process; nil for servers reached over HTTP.
	Transport http.RoundTripper
	// Release ends the hold; it is safe to call more than once.
	Release func()
}

type leaseResult struct {
	lease *Lease
	err   error
}

// post runs f on the loop goroutine; false once the service is closed.
func (s *Service) post(f func()) bool {
	select {
	case s.reqs <- f:
		return true
	case <-s.done:
		return false
	}
}

func (s *Service) loop() {
	for {
		select {
		case f := <-s.reqs:
			f()
		case <-s.done:
			return
		}
	}
}

// acquireServer leases the resident server of m, starting it (and evicting the least
// recently used idle engine) when needed.
func (s *Service) acquireServer(ctx context.Context, m *models.Model, d *Def, bin string) (*Lease, error) {
	ch := make(chan leaseResult, 1)
	if !s.post(func() { s.acquireOnLoop(m, d, bin, ch) }) {
		return nil, ErrEngineUnavailable.Msg("the inference plane is shutting down")
	}
	select {
	case r := <-ch:
		return r.lease, r.err
	case <-ctx.Done():
		// The loop answers later; a lease granted after the caller left is given back.
		go func() {
			if r := <-ch; r.lease != nil {
				r.lease.Release()
			}
		}()
		return nil, ctx.Err()
	}
}

func (s *Service) acquireOnLoop(m *models.Model, d *Def, bin string, ch chan leaseResult) {
	if s.closed {
		ch <- leaseResult{err: ErrEngineUnavailable.Msg("the inference plane is shutting down")}
		return
	}
	p := s.procs[m.ID]
	if p != nil && p.rev != m.Revision {
		s.stopOnLoop(p, "the model was re-registered")
		p = nil
	}
	if p != nil {
		p.lastUsed = s.now()
		if p.ready {
			ch <- leaseResult{lease: s.leaseOnLoop(p)}
		} else {
			p.waiters = append(p.waiters, ch)
		}
		return
	}
	var after <-chan struct{}
	if len(s.procs) >= s.maxResident {
		victim, ok := EvictionFor(m.ID, s.runningOnLoop())
		if !ok {
			ch <- leaseResult{err: ErrNoCapacity.Msg("all %d engine slots (SERVICE_MAX_RESIDENT) are busy or starting; retry later", s.maxResident).
				WithDetails(map[string]any{"maxResident": s.maxResident, "model": m.ID})}
			return
		}
		v := s.procs[victim]
		after = v.exited // the new engine starts once the victim's memory is free
		s.stopOnLoop(v, "evicted (least recently used) to start "+m.ID)
	}
	p = s.startOnLoop(m, d, bin, after)
	p.waiters = append(p.waiters, ch)
}

func (s *Service) runningOnLoop() []Running {
	out := make([]Running, 0, len(s.procs))
	for _, p := range s.procs {
		out = append(out, Running{Model: p.id, Ready: p.ready, InFlight: p.inFlight, LastUsed: p.lastUsed})
	}
	return out
}

// leaseOnLoop counts one more request in flight on p.
func (s *Service) leaseOnLoop(p *proc) *Lease {
	p.inFlight++
	p.lastUsed = s.now()
	var once sync.Once
	release := func() {
		once.Do(func() {
			s.post(func() {
				if p.inFlight > 0 {
					p.inFlight--
				}
				p.lastUsed = s.now()
			})
		})
	}
	return &Lease{BaseURL: "http://127.0.0.1:" + strconv.Itoa(p.port) + "/v1", Release: release}
}

// startOnLoop registers a starting process and launches it in the background.
func (s *Service) startOnLoop(m *models.Model, d *Def, bin string, after <-chan struct{}) *proc {
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{id: m.ID, rev: m.Revision, engine: d.Name, lastUsed: s.now(), cancel: cancel, exited: make(chan struct{}), tail: &tailBuffer{max: 2048}}
	s.procs[m.ID] = p
	delete(s.failed, m.ID)
	go s.launch(ctx, p, *m, d, bin, after)
	return p
}

// launch starts the process once after is closed, reaps it, and waits for its health.
func (s *Service) launch(ctx context.Context, p *proc, m models.Model, d *Def, bin string, after <-chan struct{}) {
	if after != nil {
		select {
		case <-after:
		case <-ctx.Done():
			close(p.exited)
			return
		}
	}
	port, err := freePort()
	if err != nil {
		close(p.exited)
		s.post(func() { s.failOnLoop(p, "no free loopback port: "+err.Error()) })
		return
	}
	cmd := exec.Command(bin, d.ServerArgs(&m, port)...)
	// Its own process group: a stop signals the server and anything it spawned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = p.tail, p.tail
	if err := cmd.Start(); err != nil {
		close(p.exited)
		s.post(func() { s.failOnLoop(p, "cannot start "+d.Binary+": "+err.Error()) })
		return
	}
	pid := cmd.Process.Pid
	s.post(func() {
		p.pid, p.port = pid, port
		if p.stopping { // stopped while starting
			signalGroup(pid, syscall.SIGKILL)
		}
	})
	go func() {
		werr := cmd.Wait()
		reason := "exited"
		if werr != nil {
			reason = werr.Error()
		}
		if t := p.tail.String(); t != "" {
			reason += "; last output: " + t
		}
		s.post(func() { s.exitOnLoop(p, reason) })
		close(p.exited)
	}()
	s.waitHealthy(ctx, p, d, port)
}

// waitHealthy polls the health endpoint until it answers ready, the process exits, the
// start is abandoned, or StartTimeout passes (the process is then killed).
func (s *Service) waitHealthy(ctx context.Context, p *proc, d *Def, port int) {
	client := &http.Client{Timeout: 2 * time.Second}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + d.HealthPath
	deadline := time.NewTimer(s.startTimeout)
	defer deadline.Stop()
	wait := 20 * time.Millisecond
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if d.HealthReady(resp.StatusCode) {
				s.post(func() { s.readyOnLoop(p) })
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-p.exited:
			return // exitOnLoop reports it
		case <-deadline.C:
			s.post(func() {
				s.failOnLoop(p, fmt.Sprintf("not healthy within %s (GET %s)", s.startTimeout, d.HealthPath))
				if p.pid > 0 {
					signalGroup(p.pid, syscall.SIGKILL)
				}
			})
			return
		case <-time.After(wait):
		}
		if wait < 250*time.Millisecond {
			wait *= 2
		}
	}
}

func (s *Service) readyOnLoop(p *proc) {
	if s.procs[p.id] != p || p.stopping {
		return
	}
	p.ready = true
	for _, w := range p.waiters {
		w <- leaseResult{lease: s.leaseOnLoop(p)}
	}
	p.waiters = nil
}

// failOnLoop records why p could not serve, answers its waiters, and frees its slot.
func (s *Service) failOnLoop(p *proc, reason string) {
	if s.procs[p.id] != p {
		return
	}
	delete(s.procs, p.id)
	p.cancel()
	s.failed[p.id] = failure{engine: p.engine, reason: clipReason(reason), at: s.now()}
	for _, w := range p.waiters {
		w <- leaseResult{err: ErrEngineUnavailable.Msg("the %s engine of model %s failed: %s", p.engine, p.id, clipReason(reason))}
	}
	p.waiters = nil
}

// exitOnLoop handles the end of a process: expected after a stop, a failure otherwise
// (the next request restarts it).
func (s *Service) exitOnLoop(p *proc, reason string) {
	if p.stopping {
		return
	}
	s.failOnLoop(p, reason)
}

// stopOnLoop removes p and signals its process group: SIGTERM, then SIGKILL after
// StopGrace. Requests in flight on it are cut off.
func (s *Service) stopOnLoop(p *proc, why string) {
	if s.procs[p.id] == p {
		delete(s.procs, p.id)
	}
	p.stopping = true
	p.cancel()
	for _, w := range p.waiters {
		w <- leaseResult{err: ErrEngineUnavailable.Msg("the engine of model %s was stopped while starting: %s", p.id, why)}
	}
	p.waiters = nil
	if p.pid == 0 {
		return // not started yet: launch sees stopping (or its cancelled context) and kills it
	}
	pid, grace := p.pid, s.stopGrace
	signalGroup(pid, syscall.SIGTERM)
	go func() {
		select {
		case <-p.exited:
		case <-time.After(grace):
			signalGroup(pid, syscall.SIGKILL)
		}
	}()
}

func signalGroup(pid int, sig syscall.Signal) {
	if pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

// freePort asks the kernel for an unused loopback port. Another process could take it
// before the engine binds it; the engine then exits, is reported failed, and the next
// request restarts it on another port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// failure is why a model's engine last failed.
type failure struct {
	engine string
	reason string
	at     time.Time
}

func clipReason(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

// tailBuffer keeps the last max bytes an engine wrote (its exit reason).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(bytes.TrimSpace(t.buf), nil))
}

// Close stops every engine (their process groups) and waits for them to exit, at most
// StopGrace plus a second; then the loop ends. Later acquisitions fail.
func (s *Service) Close() error {
	var exits []chan struct{}
	ok := s.post(func() {
		s.closed = true
		for _, p := range s.procs {
			exits = append(exits, p.exited)
			s.stopOnLoop(p, "shutting down")
		}
	})
	if !ok {
		return nil
	}
	// A closure posted after this one still runs: wait for the one above to finish.
	sync := make(chan struct{})
	s.post(func() { close(sync) })
	<-sync
	timeout := time.After(s.stopGrace + time.Second)
	var err error
	for _, e := range exits {
		select {
		case <-e:
		case <-timeout:
			err = errors.New("engines: some engine processes did not exit in time")
		}
	}
	s.closeOnce.Do(func() { close(s.done) })
	return err
}

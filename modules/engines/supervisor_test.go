package engines_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/engines"
	"github.com/svc-dev/svc/modules/models"
	"github.com/svc-dev/svc/platform/apperr"
)

func TestEvictionFor(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cases := []struct {
		name    string
		target  string
		running []engines.Running
		victim  string
		ok      bool
	}{
		{"empty", "a", nil, "", false},
		{"least recently used idle", "c", []engines.Running{
			{Model: "a", Ready: true, LastUsed: at(5)}, {Model: "b", Ready: true, LastUsed: at(3)}}, "b", true},
		{"busy ones are skipped", "c", []engines.Running{
			{Model: "a", Ready: true, LastUsed: at(5)}, {Model: "b", Ready: true, InFlight: 2, LastUsed: at(1)}}, "a", true},
		{"starting ones are skipped", "c", []engines.Running{
			{Model: "a", Ready: false, LastUsed: at(1)}, {Model: "b", Ready: true, LastUsed: at(9)}}, "b", true},
		{"all busy or starting", "c", []engines.Running{
			{Model: "a", Ready: true, InFlight: 1, LastUsed: at(1)}, {Model: "b", LastUsed: at(2)}}, "", false},
		{"never the target", "a", []engines.Running{{Model: "a", Ready: true, LastUsed: at(1)}}, "", false},
		{"tie goes to the smaller id", "z", []engines.Running{
			{Model: "m", Ready: true, LastUsed: at(1)}, {Model: "k", Ready: true, LastUsed: at(1)}}, "k", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, ok := engines.EvictionFor(c.target, c.running)
			if v != c.victim || ok != c.ok {
				t.Fatalf("EvictionFor = %q, %v; want %q, %v", v, ok, c.victim, c.ok)
			}
		})
	}
}

// newSupervisor runs the stand-in (this test binary) as llama-server.
func newSupervisor(t testing.TB, max int, opts ...func(*engines.Options)) *engines.Service {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := engines.Options{MaxResident: max, StopGrace: 2 * time.Second, LookPath: func(name string) (string, error) {
		switch name {
		case "llama-server":
			return exe, nil
		case "espeak-ng":
			return exec.LookPath(name)
		}
		return "", errors.New("not found")
	}}
	for _, f := range opts {
		f(&o)
	}
	svc := engines.New(o)
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

func llamaModel(t testing.TB, id string, args ...string) *models.Model {
	t.Helper()
	p := filepath.Join(t.TempDir(), strings.ReplaceAll(id, "/", "_")+".gguf")
	if err := os.WriteFile(p, []byte("GGUF"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &models.Model{ID: id, Binding: models.BindingLlamaCpp, ModelPath: p, Args: args, Revision: 1, CtxSize: 512,
		Modalities: []models.Modality{models.ModalityChat, models.ModalityEmbeddings}}
}

// chat sends one chat completion to a leased engine and returns the reply text.
func chat(t *testing.T, l *engines.Lease, content string) (string, error) {
	t.Helper()
	body := `{"model":"x","messages":[{"role":"user","content":` + mustJSON(content) + `}]}`
	resp, err := http.Post(l.BaseURL+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("chat answer: %v %+v", err, out)
	}
	return out.Choices[0].Message.Content, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func resident(svc *engines.Service, id string) (engines.Resident, bool) {
	for _, r := range svc.Resident() {
		if r.Model == id {
			return r, true
		}
	}
	return engines.Resident{}, false
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// eventually polls cond (the supervisor reacts to process exits asynchronously).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStartForwardAndLiveState(t *testing.T) {
	svc := newSupervisor(t, 2)
	m := llamaModel(t, "qwen")
	ctx := context.Background()
	if st := svc.State(ctx, m); st.State != models.StateStopped {
		t.Fatalf("state before start = %+v", st)
	}
	l, err := svc.Acquire(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := chat(t, l, "hello")
	if err != nil || !strings.Contains(reply, "ctx 512: hello") {
		t.Fatalf("reply %q, %v", reply, err)
	}
	r, ok := resident(svc, "qwen")
	if !ok || r.State != models.StateBusy || r.InFlight != 1 || r.PID == 0 || r.Port == 0 || r.Engine != "llama.cpp" || !alive(r.PID) {
		t.Fatalf("resident while leased = %+v", r)
	}
	if st := svc.State(ctx, m); st.State != models.StateBusy {
		t.Fatalf("state while leased = %+v", st)
	}
	l.Release()
	l.Release() // a second release changes nothing
	eventually(t, "ready after release", func() bool { r, _ := resident(svc, "qwen"); return r.State == models.StateReady && r.InFlight == 0 })
	// The same process serves the next request.
	l2, err := svc.Acquire(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release()
	if r2, _ := resident(svc, "qwen"); r2.PID != r.PID {
		t.Fatalf("restarted: pid %d then %d", r.PID, r2.PID)
	}
}

func TestLRUEvictionAndNoCapacity(t *testing.T) {
	svc := newSupervisor(t, 2)
	ctx := context.Background()
	a, b, c := llamaModel(t, "a"), llamaModel(t, "b"), llamaModel(t, "c")
	use := func(m *models.Model) {
		t.Helper()
		l, err := svc.Acquire(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	use(a)
	use(b)
	use(a) // b is now the least recently used
	eventually(t, "a and b idle", func() bool {
		ra, _ := resident(svc, "a")
		rb, _ := resident(svc, "b")
		return ra.InFlight == 0 && rb.InFlight == 0
	})
	rb, _ := resident(svc, "b")
	use(c)
	if _, ok := resident(svc, "b"); ok {
		t.Fatalf("b not evicted: %+v", svc.Resident())
	}
	if _, ok := resident(svc, "a"); !ok {
		t.Fatalf("a evicted instead of b: %+v", svc.Resident())
	}
	eventually(t, "b's process gone", func() bool { return !alive(rb.PID) })
	if st := svc.State(ctx, b); st.State != models.StateStopped {
		t.Fatalf("evicted b state = %+v", st)
	}

	// Both slots busy: a third model gets no_capacity and nothing changes.
	la, err := svc.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := svc.Acquire(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Acquire(ctx, b)
	if !errors.Is(err, engines.ErrNoCapacity) || apperr.From(err).Status != http.StatusServiceUnavailable {
		t.Fatalf("third model while both busy: %v", err)
	}
	if n := len(svc.Resident()); n != 2 {
		t.Fatalf("resident = %+v", svc.Resident())
	}
	// Releasing a frees a slot for b (a is evicted, c stays: it is still busy).
	la.Release()
	eventually(t, "a idle", func() bool { r, _ := resident(svc, "a"); return r.InFlight == 0 })
	lb, err := svc.Acquire(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	lb.Release()
	if _, ok := resident(svc, "a"); ok {
		t.Fatalf("a still resident: %+v", svc.Resident())
	}
	if _, ok := resident(svc, "c"); !ok {
		t.Fatalf("busy c evicted: %+v", svc.Resident())
	}
	lc.Release()
}

func TestCrashIsFailedThenRestarted(t *testing.T) {
	svc := newSupervisor(t, 2)
	ctx := context.Background()
	m := llamaModel(t, "crashy")
	l, err := svc.Acquire(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := resident(svc, "crashy")
	if _, err := chat(t, l, "crash"); err == nil {
		t.Fatal("the crashing request succeeded")
	}
	l.Release()
	eventually(t, "failed state", func() bool { return svc.State(ctx, m).State == models.StateFailed })
	st := svc.State(ctx, m)
	if !strings.Contains(st.Detail, "exit status 3") || !strings.Contains(st.Detail, "GGML_ASSERT") {
		t.Fatalf("failed detail = %q", st.Detail)
	}
	if _, ok := resident(svc, "crashy"); ok {
		t.Fatal("a crashed engine is listed as resident")
	}
	// The next request restarts it.
	l2, err := svc.Acquire(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release()
	r2, _ := resident(svc, "crashy")
	if r2.PID == r.PID || r2.PID == 0 {
		t.Fatalf("not restarted: %d then %d", r.PID, r2.PID)
	}
	if reply, err := chat(t, l2, "again"); err != nil || !strings.Contains(reply, "again") {
		t.Fatalf("after restart: %q %v", reply, err)
	}
}

func TestStartFailures(t *testing.T) {
	svc := newSupervisor(t, 2, func(o *engines.Options) { o.StartTimeout = 500 * time.Millisecond })
	ctx := context.Background()
	_, err := svc.Acquire(ctx, llamaModel(t, "bad", "--fake-exit-at-start"))
	if !errors.Is(err, engines.ErrEngineUnavailable) || !strings.Contains(err.Error(), "failed to load model") {
		t.Fatalf("exit at start: %v", err)
	}
	if st := svc.State(ctx, llamaModel(t, "bad")); st.State != models.StateFailed {
		t.Fatalf("state after failed start = %+v", st)
	}
	_, err = svc.Acquire(ctx, llamaModel(t, "stuck", "--fake-never-healthy"))
	if !errors.Is(err, engines.ErrEngineUnavailable) || !strings.Contains(err.Error(), "not healthy within") {
		t.Fatalf("never healthy: %v", err)
	}
	if n := len(svc.Resident()); n != 0 {
		t.Fatalf("failed engines hold slots: %+v", svc.Resident())
	}
}

func TestSlowStartServesEveryWaiter(t *testing.T) {
	svc := newSupervisor(t, 1)
	m := llamaModel(t, "slow", "--fake-slow-start=300ms")
	type res struct {
		l   *engines.Lease
		err error
	}
	ch := make(chan res, 3)
	for range 3 {
		go func() { l, err := svc.Acquire(context.Background(), m); ch <- res{l, err} }()
	}
	for range 3 {
		r := <-ch
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.l.Release()
	}
	if rs := svc.Resident(); len(rs) != 1 || rs[0].InFlight != 3 {
		t.Fatalf("resident = %+v", rs)
	}
}

func TestWarmEvictAndReRegistration(t *testing.T) {
	svc := newSupervisor(t, 2)
	ctx := context.Background()
	m := llamaModel(t, "w")
	st, err := svc.Warm(ctx, m)
	if err != nil || st.State != models.StateReady {
		t.Fatalf("warm = %+v, %v", st, err)
	}
	r, ok := resident(svc, "w")
	if !ok || r.State != models.StateReady || r.InFlight != 0 {
		t.Fatalf("after warm: %+v", svc.Resident())
	}
	// A new revision of the registration restarts the engine.
	m2 := *m
	m2.Revision = 2
	if _, err := svc.Warm(ctx, &m2); err != nil {
		t.Fatal(err)
	}
	r2, _ := resident(svc, "w")
	if r2.PID == r.PID {
		t.Fatal("re-registered model kept its old engine")
	}
	if alive(r.PID) {
		eventually(t, "old engine gone", func() bool { return !alive(r.PID) })
	}
	st, err = svc.Evict(ctx, &m2)
	if err != nil || st.State != models.StateStopped {
		t.Fatalf("evict = %+v, %v", st, err)
	}
	if alive(r2.PID) {
		t.Fatalf("pid %d alive after evict", r2.PID)
	}
	if len(svc.Resident()) != 0 {
		t.Fatalf("resident after evict: %+v", svc.Resident())
	}
	if st, _ := svc.Evict(ctx, &m2); st.State != models.StateStopped {
		t.Fatalf("second evict = %+v", st)
	}
}

func TestCloseKillsChildren(t *testing.T) {
	svc := newSupervisor(t, 2)
	ctx := context.Background()
	var pids []int
	for _, id := range []string{"x", "y"} {
		l, err := svc.Acquire(ctx, llamaModel(t, id))
		if err != nil {
			t.Fatal(err)
		}
		if id == "x" {
			l.Release()
		} // y stays busy: shutdown stops it anyway
		r, _ := resident(svc, id)
		pids = append(pids, r.PID)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Fatalf("pid %d alive after Close", pid)
		}
	}
	if _, err := svc.Acquire(ctx, llamaModel(t, "z")); !errors.Is(err, engines.ErrEngineUnavailable) {
		t.Fatalf("acquire after close: %v", err)
	}
}

func TestMissingBinaryAndModelFile(t *testing.T) {
	svc := newSupervisor(t, 2)
	ctx := context.Background()
	w := &models.Model{ID: "whisper", Binding: models.BindingWhisperCpp, ModelPath: "/nonexistent/ggml-base.bin", Revision: 1}
	st := svc.State(ctx, w)
	if st.State != models.StateUnavailable || !strings.Contains(st.Detail, "whisper-server is not installed") || !strings.Contains(st.Detail, "cmake") {
		t.Fatalf("missing binary state = %+v", st)
	}
	_, err := svc.Acquire(ctx, w)
	e := apperr.From(err)
	if !errors.Is(err, engines.ErrEngineUnavailable) || e.Status != http.StatusServiceUnavailable || !strings.Contains(mustJSON(e.Details), "installHint") {
		t.Fatalf("missing binary acquire: %v", err)
	}
	if _, err := svc.Warm(ctx, w); !errors.Is(err, engines.ErrEngineUnavailable) {
		t.Fatalf("warm without binary: %v", err)
	}
	m := llamaModel(t, "gone")
	m.ModelPath = filepath.Join(t.TempDir(), "missing.gguf")
	if st := svc.State(ctx, m); st.State != models.StateUnavailable || !strings.Contains(st.Detail, "missing.gguf") {
		t.Fatalf("missing model file state = %+v", st)
	}
	if _, err := svc.Acquire(ctx, m); !errors.Is(err, engines.ErrEngineUnavailable) {
		t.Fatalf("missing model file acquire: %v", err)
	}
	if len(svc.Resident()) != 0 {
		t.Fatal("something started")
	}
}

func TestServerArgs(t *testing.T) {
	m := &models.Model{ModelPath: "/m/q.gguf", CtxSize: 4096, Args: []string{"--n-gpu-layers", "99"}, Modalities: []models.Modality{models.ModalityChat}}
	got := strings.Join(engines.LlamaServerArgs(m, 4321), " ")
	if got != "-m /m/q.gguf --host 127.0.0.1 --port 4321 --ctx-size 4096 --n-gpu-layers 99" {
		t.Fatalf("llama chat args = %q", got)
	}
	m = &models.Model{ModelPath: "/m/e.gguf", Modalities: []models.Modality{models.ModalityEmbeddings}}
	if got := strings.Join(engines.LlamaServerArgs(m, 1), " "); got != "-m /m/e.gguf --host 127.0.0.1 --port 1 --embeddings" {
		t.Fatalf("llama embeddings args = %q", got)
	}
	w := &models.Model{ModelPath: "/m/w.bin"}
	if got := strings.Join(engines.WhisperServerArgs(w, 2), " "); got != "-m /m/w.bin --host 127.0.0.1 --port 2 --inference-path /v1/audio/transcriptions" {
		t.Fatalf("whisper args = %q", got)
	}
}

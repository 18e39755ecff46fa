// Package engines knows the engines that serve models: which are installed (readiness per
// (engine, modality) slot, with a reason and an install hint when not), which are resident,
// and how to warm or evict a model. Hosted-compatible models need no engine on this machine;
// local engines (llama.cpp, whisper.cpp, stable-diffusion.cpp, espeak-ng) are detected on
// PATH; llama.cpp and whisper.cpp servers run as supervised child processes (at most
// MaxResident, least recently used idle ones evicted first), stable-diffusion.cpp and
// espeak-ng run once per request.
package engines

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/svc-dev/svc/modules/models"
	"github.com/svc-dev/svc/platform/apperr"
)

// ErrEngineUnavailable is SPEC's 503 for a model whose engine is not installed, whose
// model file is missing, or whose engine failed to start.
var ErrEngineUnavailable = apperr.Unavailable("engine_unavailable", "engine unavailable")

// ErrNoCapacity is SPEC's 503 when every resident slot is taken by a busy or starting engine.
var ErrNoCapacity = apperr.Unavailable("no_capacity", "no engine capacity")

// Def describes one engine.
type Def struct {
	// Name is the engine's name as listed (llama.cpp, whisper.cpp, …).
	Name string
	// Binding is the registry binding the engine serves; empty for hosted-compatible.
	Binding models.Binding
	// Binary is the executable looked up on PATH; empty for engines that need none.
	Binary string
	// Modalities the engine serves.
	Modalities []models.Modality
	// InstallHint tells how to install Binary.
	InstallHint string
	// ServerArgs, for engines run as a resident server, are its arguments to load m and
	// listen on 127.0.0.1:port. Nil for engines run once per request.
	ServerArgs func(m *models.Model, port int) []string
	// HealthPath is polled after start until HealthReady accepts its status.
	HealthPath  string
	HealthReady func(status int) bool
	// NeedsModelFile is set when the binding's modelPath must exist.
	NeedsModelFile bool
}

// HostedCompatible is the engine name of remote OpenAI-compatible bindings.
const HostedCompatible = "hosted-compatible"

// Builtin lists the engines this build knows, hosted first.
func Builtin() []Def {
	return []Def{
		{Name: HostedCompatible, Modalities: models.AllModalities()},
		{Name: "llama.cpp", Binding: models.BindingLlamaCpp, Binary: "llama-server", Modalities: []models.Modality{models.ModalityChat, models.ModalityEmbeddings},
			InstallHint:    "install llama.cpp (brew install llama.cpp, or build it: git clone https://github.com/ggml-org/llama.cpp && cd llama.cpp && cmake -B build && cmake --build build --config Release -t llama-server) and put llama-server on PATH",
			ServerArgs:     LlamaServerArgs,
			HealthPath:     "/health",
			HealthReady:    func(status int) bool { return status == http.StatusOK }, // 503 while the model loads
			NeedsModelFile: true},
		{Name: "whisper.cpp", Binding: models.BindingWhisperCpp, Binary: "whisper-server", Modalities: []models.Modality{models.ModalityTranscription},
			InstallHint: "build whisper.cpp (git clone https://github.com/ggml-org/whisper.cpp && cd whisper.cpp && cmake -B build && cmake --build build --config Release) and put build/bin/whisper-server on PATH",
			ServerArgs:  WhisperServerArgs,
			HealthPath:  "/health",
			// whisper-server loads the model before it listens; builds without /health answer 404.
			HealthReady:    func(status int) bool { return status < 500 },
			NeedsModelFile: true},
		{Name: "stable-diffusion.cpp", Binding: models.BindingStableDiffusionCpp, Binary: "sd", Modalities: []models.Modality{models.ModalityImages},
			InstallHint:    "build stable-diffusion.cpp (see https://github.com/leejet/stable-diffusion.cpp#build) and put its sd binary on PATH",
			NeedsModelFile: true},
		{Name: "espeak-ng", Binding: models.BindingEspeakNg, Binary: "espeak-ng", Modalities: []models.Modality{models.ModalitySpeech},
			InstallHint: "apt-get install espeak-ng (Debian/Ubuntu), dnf install espeak-ng (Fedora) or brew install espeak-ng (macOS)"},
	}
}

// LlamaServerArgs is llama-server's command line for m: the model, the loopback port, the
// context size, --embeddings for a model registered for embeddings, then the extra args.
func LlamaServerArgs(m *models.Model, port int) []string {
	args := []string{"-m", m.ModelPath, "--host", "127.0.0.1", "--port", strconv.Itoa(port)}
	if m.CtxSize > 0 {
		args = append(args, "--ctx-size", strconv.Itoa(m.CtxSize))
	}
	// /v1/embeddings answers only when the server was started with --embeddings.
	if slices.Contains(m.Modalities, models.ModalityEmbeddings) && !slices.Contains(m.Args, "--embeddings") && !slices.Contains(m.Args, "--embedding") {
		args = append(args, "--embeddings")
	}
	return append(args, m.Args...)
}

// WhisperServerArgs is whisper-server's command line for m; its inference route is moved
// to OpenAI's path so that requests are forwarded unchanged.
func WhisperServerArgs(m *models.Model, port int) []string {
	return []string{"-m", m.ModelPath, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--inference-path", "/v1/audio/transcriptions"}
}

// Slot is the readiness of one (engine, modality) pair.
type Slot struct {
	Engine      string          `json:"engine"`
	Modality    models.Modality `json:"modality"`
	Ready       bool            `json:"ready"`
	Reason      string          `json:"reason,omitempty"`
	InstallHint string          `json:"installHint,omitempty"`
	// Path is where the engine binary was found.
	Path string `json:"path,omitempty"`
}

// Resident is one engine process holding a model in memory.
type Resident struct {
	Model    string    `json:"model"`
	Engine   string    `json:"engine"`
	PID      int       `json:"pid,omitempty"`
	Port     int       `json:"port,omitempty"`
	State    string    `json:"state"`
	InFlight int       `json:"inFlight"`
	LastUsed time.Time `json:"lastUsed"`
}

// Options configure the service.
type Options struct {
	// MaxResident is SERVICE_MAX_RESIDENT: how many local engines may be resident at once.
	MaxResident int
	// LookPath finds an executable (exec.LookPath when nil; tests script it).
	LookPath func(file string) (string, error)
	// Defs replaces Builtin (tests).
	Defs []Def
	// StartTimeout bounds an engine server's start until healthy (default 5 minutes: large
	// models take a while to load).
	StartTimeout time.Duration
	// StopGrace is how long a stopped engine has between SIGTERM and SIGKILL (default 5s).
	StopGrace time.Duration
	// SpeechTimeout bounds one espeak-ng or sd run (default 2 minutes; images: 10).
	SpeechTimeout time.Duration
}

// Service reports engine readiness and runs models; it implements models.Engines.
type Service struct {
	maxResident  int
	lookPath     func(string) (string, error)
	defs         []Def
	startTimeout time.Duration
	stopGrace    time.Duration
	runTimeout   time.Duration
	now          func() time.Time

	reqs      chan func()
	done      chan struct{}
	closeOnce sync.Once
	// Owned by the loop goroutine.
	procs  map[string]*proc
	failed map[string]failure
	closed bool
}

// New builds the service.
func New(opts Options) *Service {
	if opts.LookPath == nil {
		opts.LookPath = exec.LookPath
	}
	if opts.Defs == nil {
		opts.Defs = Builtin()
	}
	if opts.MaxResident < 1 {
		opts.MaxResident = 1
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 5 * time.Minute
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 5 * time.Second
	}
	if opts.SpeechTimeout <= 0 {
		opts.SpeechTimeout = 2 * time.Minute
	}
	s := &Service{maxResident: opts.MaxResident, lookPath: opts.LookPath, defs: opts.Defs,
		startTimeout: opts.StartTimeout, stopGrace: opts.StopGrace, runTimeout: opts.SpeechTimeout, now: time.Now,
		reqs: make(chan func()), done: make(chan struct{}), procs: map[string]*proc{}, failed: map[string]failure{}}
	go s.loop()
	return s
}

// MaxResident is the number of resident engine slots.
func (s *Service) MaxResident() int { return s.maxResident }

// Slots reports readiness per (engine, modality). PATH is searched on every call so that an
// engine installed while the process runs is picked up without a restart.
func (s *Service) Slots() []Slot {
	var out []Slot
	for _, d := range s.defs {
		ready, path, reason, hint := true, "", "", ""
		if d.Binary != "" {
			p, err := s.lookPath(d.Binary)
			if err != nil {
				ready, reason, hint = false, d.Binary+" not found on PATH", d.InstallHint
			} else {
				path = p
			}
		}
		for _, m := range d.Modalities {
			out = append(out, Slot{Engine: d.Name, Modality: m, Ready: ready, Reason: reason, InstallHint: hint, Path: path})
		}
	}
	return out
}

// Resident lists the resident engine processes (starting ones included), by model id.
func (s *Service) Resident() []Resident {
	ch := make(chan []Resident, 1)
	if !s.post(func() {
		out := make([]Resident, 0, len(s.procs))
		for _, p := range s.procs {
			out = append(out, Resident{Model: p.id, Engine: p.engine, PID: p.pid, Port: p.port, State: procState(p), InFlight: p.inFlight, LastUsed: p.lastUsed.UTC()})
		}
		ch <- out
	}) {
		return []Resident{}
	}
	out := <-ch
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

func procState(p *proc) string {
	switch {
	case !p.ready:
		return models.StateStarting
	case p.inFlight > 0:
		return models.StateBusy
	}
	return models.StateReady
}

// AnyReady fails when no engine can serve anything (readiness stays up while one can).
func (s *Service) AnyReady(context.Context) error {
	for _, sl := range s.Slots() {
		if sl.Ready {
			return nil
		}
	}
	return ErrEngineUnavailable.Msg("no engine is available")
}

// Report is the readiness detail /readyz adds: every (engine, modality) slot.
func (s *Service) Report(context.Context) map[string]any {
	return map[string]any{"engines": s.Slots()}
}

// def returns the engine of binding b.
func (s *Service) def(b models.Binding) *Def {
	for i := range s.defs {
		if s.defs[i].Binding == b && b != "" {
			return &s.defs[i]
		}
	}
	return nil
}

// locate finds m's engine and binary, and checks its model file: a missing one is a
// readiness state (engine_unavailable with the install hint), not a crash.
func (s *Service) locate(m *models.Model) (*Def, string, error) {
	d := s.def(m.Binding)
	if d == nil {
		return nil, "", ErrEngineUnavailable.Msg("binding %s has no engine in this build", m.Binding)
	}
	bin, err := s.lookPath(d.Binary)
	if err != nil {
		return nil, "", ErrEngineUnavailable.Msg("model %s needs %s, but %s is not installed (not found on PATH); %s", m.ID, d.Name, d.Binary, d.InstallHint).
			WithDetails(map[string]any{"engine": d.Name, "binary": d.Binary, "installHint": d.InstallHint})
	}
	if d.NeedsModelFile {
		if st, err := os.Stat(m.ModelPath); err != nil || st.IsDir() {
			return nil, "", ErrEngineUnavailable.Msg("model %s: model file %s is missing or not a regular file on the inference host", m.ID, m.ModelPath).
				WithDetails(map[string]any{"engine": d.Name, "modelPath": m.ModelPath})
		}
	}
	return d, bin, nil
}

// Acquire leases an engine for one request on local model m: a resident server (started
// on demand, evicting the least recently used idle one when all slots are taken) or a
// per-request runner. Errors: engine_unavailable (not installed, model file missing,
// failed to start), no_capacity (every slot busy).
func (s *Service) Acquire(ctx context.Context, m *models.Model) (*Lease, error) {
	d, bin, err := s.locate(m)
	if err != nil {
		return nil, err
	}
	if d.ServerArgs == nil {
		return &Lease{BaseURL: "http://" + d.Binary + ".local/v1", Transport: s.runner(d, bin, m), Release: func() {}}, nil
	}
	return s.acquireServer(ctx, m, d, bin)
}

// State implements models.Engines.
func (s *Service) State(_ context.Context, m *models.Model) models.State {
	if m.Binding == models.BindingHostedCompatible {
		return models.State{State: models.StateRemote}
	}
	d, _, err := s.locate(m)
	if err != nil {
		return models.State{State: models.StateUnavailable, Detail: apperrMessage(err)}
	}
	if d.ServerArgs == nil {
		return models.State{State: models.StateReady, Detail: d.Binary + " runs once per request; nothing stays resident"}
	}
	ch := make(chan models.State, 1)
	if !s.post(func() {
		if p := s.procs[m.ID]; p != nil {
			ch <- models.State{State: procState(p), Detail: fmt.Sprintf("pid %d, port %d, %d in flight", p.pid, p.port, p.inFlight)}
			return
		}
		if f, ok := s.failed[m.ID]; ok {
			ch <- models.State{State: models.StateFailed, Detail: f.reason + " (at " + f.at.UTC().Format(time.RFC3339) + "; the next request restarts it)"}
			return
		}
		ch <- models.State{State: models.StateStopped}
	}) {
		return models.State{State: models.StateStopped, Detail: "shutting down"}
	}
	return <-ch
}

// Warm implements models.Engines: a resident engine is started and waited for until
// healthy; hosted models and per-request engines have nothing to load.
func (s *Service) Warm(ctx context.Context, m *models.Model) (models.State, error) {
	if m.Binding == models.BindingHostedCompatible {
		return models.State{State: models.StateRemote, Detail: "no-op: hosted-compatible model served remotely by " + host(m.BaseURL) + "; nothing to load"}, nil
	}
	d, _, err := s.locate(m)
	if err != nil {
		return models.State{}, err
	}
	if d.ServerArgs == nil {
		return models.State{State: models.StateReady, Detail: "no-op: " + d.Binary + " runs once per request; nothing to load"}, nil
	}
	l, err := s.Acquire(ctx, m)
	if err != nil {
		return models.State{}, err
	}
	l.Release()
	return models.State{State: models.StateReady, Detail: "engine started and healthy"}, nil
}

// Evict implements models.Engines: a resident engine is stopped (requests in flight on it
// are cut off) and waited for; anything else holds nothing locally.
func (s *Service) Evict(ctx context.Context, m *models.Model) (models.State, error) {
	if m.Binding == models.BindingHostedCompatible {
		return models.State{State: models.StateRemote, Detail: "no-op: hosted-compatible model holds no local engine"}, nil
	}
	ch := make(chan chan struct{}, 1)
	if !s.post(func() {
		delete(s.failed, m.ID)
		p := s.procs[m.ID]
		if p == nil {
			ch <- nil
			return
		}
		ch <- p.exited
		s.stopOnLoop(p, "evicted on request")
	}) {
		return models.State{State: models.StateStopped, Detail: "shutting down"}, nil
	}
	exited := <-ch
	if exited == nil {
		return models.State{State: models.StateStopped, Detail: "nothing was resident"}, nil
	}
	select {
	case <-exited:
	case <-ctx.Done():
		return models.State{}, ctx.Err()
	}
	return models.State{State: models.StateStopped, Detail: "engine stopped"}, nil
}

func apperrMessage(err error) string {
	if e := apperr.From(err); e != nil {
		return e.Message
	}
	return err.Error()
}

func host(base string) string {
	if u, err := url.Parse(base); err == nil && u.Host != "" {
		return u.Host
	}
	return "the upstream"
}

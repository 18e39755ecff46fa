// Package engines knows the engines that serve models: which are installed (readiness per
// (engine, modality) slot, with a reason and an install hint when not), which are resident,
// and how to warm or evict a model. Hosted-compatible models need no engine on this machine;
// local engines (llama.cpp, whisper.cpp, stable-diffusion.cpp, espeak-ng) are detected on
// PATH now and run as supervised child processes in a later release.
package engines

import (
	"context"
	"net/url"
	"os/exec"

	"github.com/svc-dev/svc/modules/models"
	"github.com/svc-dev/svc/platform/apperr"
)

// ErrEngineUnavailable is SPEC's 503 for a model whose engine is not installed.
var ErrEngineUnavailable = apperr.Unavailable("engine_unavailable", "engine unavailable")

// Def describes one engine.
type Def struct {
	// Name is the engine's name as listed (llama.cpp, whisper.cpp, …).
	Name string
	// Binary is the executable looked up on PATH; empty for engines that need none.
	Binary string
	// Modalities the engine serves.
	Modalities []models.Modality
	// InstallHint tells how to install Binary.
	InstallHint string
}

// HostedCompatible is the engine name of remote OpenAI-compatible bindings.
const HostedCompatible = "hosted-compatible"

// Builtin lists the engines this build knows, hosted first.
func Builtin() []Def {
	return []Def{
		{Name: HostedCompatible, Modalities: models.AllModalities()},
		{Name: "llama.cpp", Binary: "llama-server", Modalities: []models.Modality{models.ModalityChat, models.ModalityEmbeddings},
			InstallHint: "install llama.cpp (brew install llama.cpp, or build it: git clone https://github.com/ggml-org/llama.cpp && cd llama.cpp && cmake -B build && cmake --build build --config Release -t llama-server) and put llama-server on PATH"},
		{Name: "whisper.cpp", Binary: "whisper-server", Modalities: []models.Modality{models.ModalityTranscription},
			InstallHint: "build whisper.cpp (git clone https://github.com/ggml-org/whisper.cpp && cd whisper.cpp && cmake -B build && cmake --build build --config Release) and put build/bin/whisper-server on PATH"},
		{Name: "stable-diffusion.cpp", Binary: "sd", Modalities: []models.Modality{models.ModalityImages},
			InstallHint: "build stable-diffusion.cpp (see https://github.com/leejet/stable-diffusion.cpp#build) and put its sd binary on PATH"},
		{Name: "espeak-ng", Binary: "espeak-ng", Modalities: []models.Modality{models.ModalitySpeech},
			InstallHint: "apt-get install espeak-ng (Debian/Ubuntu), dnf install espeak-ng (Fedora) or brew install espeak-ng (macOS)"},
	}
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
	Engine string `json:"engine"`
	Model  string `json:"model"`
	State  string `json:"state"`
}

// Options configure the service.
type Options struct {
	// MaxResident is SERVICE_MAX_RESIDENT: how many local engines may be resident at once.
	MaxResident int
	// LookPath finds an executable (exec.LookPath when nil; tests script it).
	LookPath func(file string) (string, error)
	// Defs replaces Builtin (tests).
	Defs []Def
}

// Service reports engine readiness and runs models; it implements models.Engines.
type Service struct {
	maxResident int
	lookPath    func(string) (string, error)
	defs        []Def
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
	return &Service{maxResident: opts.MaxResident, lookPath: opts.LookPath, defs: opts.Defs}
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

// Resident lists the resident engines. Hosted models hold no local engine, so the list is
// empty until local bindings arrive.
func (s *Service) Resident() []Resident { return []Resident{} }

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

// State implements models.Engines.
func (s *Service) State(_ context.Context, m *models.Model) models.State {
	switch m.Binding {
	case models.BindingHostedCompatible:
		return models.State{State: models.StateRemote}
	}
	return models.State{State: models.StateUnavailable, Detail: "binding " + string(m.Binding) + " has no engine in this build"}
}

// Warm implements models.Engines: hosted models are served remotely, so there is nothing to load.
func (s *Service) Warm(ctx context.Context, m *models.Model) (models.State, error) {
	switch m.Binding {
	case models.BindingHostedCompatible:
		return models.State{State: models.StateRemote, Detail: "no-op: hosted-compatible model served remotely by " + host(m.BaseURL) + "; nothing to load"}, nil
	}
	return models.State{}, ErrEngineUnavailable.Msg("binding %s has no engine in this build", m.Binding)
}

// Evict implements models.Engines: hosted models hold nothing locally.
func (s *Service) Evict(ctx context.Context, m *models.Model) (models.State, error) {
	switch m.Binding {
	case models.BindingHostedCompatible:
		return models.State{State: models.StateRemote, Detail: "no-op: hosted-compatible model holds no local engine"}, nil
	}
	// Nothing of an unknown binding can be resident in this build: nothing to free.
	return models.State{State: models.StateUnavailable, Detail: "binding " + string(m.Binding) + " has no engine in this build"}, nil
}

func host(base string) string {
	if u, err := url.Parse(base); err == nil && u.Host != "" {
		return u.Host
	}
	return "the upstream"
}

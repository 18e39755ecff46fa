package engines_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/engines"
	"github.com/svc-dev/svc/modules/engines/enginetest"
	"github.com/svc-dev/svc/modules/models"
	"github.com/svc-dev/svc/platform/httpx"
	"github.com/svc-dev/svc/platform/testkit"
)

// registry is a fixed set of local models as the data plane sees them.
type registry map[string]*models.Model

func (r registry) Lookup(_ context.Context, id string) (dataplane.Target, error) {
	m, ok := r[id]
	if !ok {
		return dataplane.Target{}, dataplane.ErrModelNotFound.Msg("model %q is not registered", id)
	}
	t := dataplane.Target{LogicalID: m.ID, Binding: string(m.Binding)}
	for _, mod := range m.Modalities {
		t.Modalities = append(t.Modalities, string(mod))
	}
	return t, nil
}

func (r registry) List(ctx context.Context) ([]dataplane.Target, error) {
	var out []dataplane.Target
	for id := range r {
		t, _ := r.Lookup(ctx, id)
		out = append(out, t)
	}
	return out, nil
}

// binding is what cmd's adapter does: lease an engine for the request, release it after.
type binding struct {
	reg registry
	svc *engines.Service
}

func (b binding) Acquire(ctx context.Context, t dataplane.Target) (*dataplane.Upstream, error) {
	m := b.reg[t.LogicalID]
	l, err := b.svc.Acquire(ctx, m)
	if err != nil {
		return nil, err
	}
	return &dataplane.Upstream{BaseURL: l.BaseURL, Model: m.ID, Release: l.Release, Transport: l.Transport}, nil
}

func newPlane(t *testing.T, svc *engines.Service, reg registry) *testkit.Server {
	t.Helper()
	bs := map[string]dataplane.Binding{}
	for _, b := range models.KnownBindings() {
		if models.IsLocal(b) {
			bs[string(b)] = binding{reg: reg, svc: svc}
		}
	}
	dp, err := dataplane.New(dataplane.Options{Models: reg, Bindings: bs})
	if err != nil {
		t.Fatal(err)
	}
	return testkit.New(t, testkit.Options{Options: httpx.Options{OpenAIPrefix: "/v1/"}}, dp, engines.NewModule(svc))
}

func TestChatThroughTheDataPlane(t *testing.T) {
	svc := newSupervisor(t, 1)
	a, b := llamaModel(t, "local/a"), llamaModel(t, "local/b")
	srv := newPlane(t, svc, registry{a.ID: a, b.ID: b})
	resp := srv.Do(http.MethodPost, "/v1/chat/completions", map[string]any{"model": "local/a", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if resp.Status != http.StatusOK {
		t.Fatalf("chat = %d %s", resp.Status, resp.Body)
	}
	out := resp.Map(t)
	if out["model"] != "local/a" || !strings.Contains(string(resp.Body), "ctx 512: hi") {
		t.Fatalf("chat answer %s", resp.Body)
	}
	// The listing shows the resident engine, idle again once the request is done.
	var listing engines.Listing
	eventually(t, "idle in listing", func() bool {
		srv.Do(http.MethodGet, "/admin/engines", nil).JSON(t, &listing)
		return len(listing.Engines) == 1 && listing.Engines[0].InFlight == 0
	})
	if e := listing.Engines[0]; e.Model != "local/a" || e.PID == 0 || e.Port == 0 || e.State != models.StateReady || listing.MaxResident != 1 {
		t.Fatalf("listing = %+v", listing)
	}
	// With the only slot busy, another model is 503 no_capacity in OpenAI's error shape.
	hold, err := svc.Acquire(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	resp = srv.Do(http.MethodPost, "/v1/chat/completions", map[string]any{"model": "local/b", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if resp.Status != http.StatusServiceUnavailable || resp.ErrorCode() != "no_capacity" {
		t.Fatalf("busy slot = %d %s", resp.Status, resp.Body)
	}
	hold.Release()
	// A chat-only engine asked for speech is modality_not_supported, before any start.
	resp = srv.Do(http.MethodPost, "/v1/audio/speech", map[string]any{"model": "local/b", "input": "hi", "voice": "alloy"})
	if resp.Status != http.StatusNotFound || resp.ErrorCode() != "modality_not_supported" {
		t.Fatalf("speech on llama = %d %s", resp.Status, resp.Body)
	}
}

func needEspeak(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed (apt-get install espeak-ng; .ci/run installs it)")
	}
}

// checkWAV asserts a RIFF/WAVE file with a data chunk of real audio.
func checkWAV(t *testing.T, b []byte) {
	t.Helper()
	if len(b) < 44 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" || string(b[12:16]) != "fmt " {
		t.Fatalf("not a WAV file: % x", b[:min(len(b), 16)])
	}
	if ch := binary.LittleEndian.Uint16(b[22:24]); ch != 1 {
		t.Fatalf("channels = %d", ch)
	}
	// A short sentence at espeak-ng's 22050 Hz, 16-bit mono is tens of kilobytes.
	if len(b) < 10_000 {
		t.Fatalf("only %d bytes of audio", len(b))
	}
}

func TestEspeakSpeechThroughTheDataPlane(t *testing.T) {
	needEspeak(t)
	svc := newSupervisor(t, 1)
	tts := &models.Model{ID: "tts", Binding: models.BindingEspeakNg, Voice: "en", Revision: 1, Modalities: []models.Modality{models.ModalitySpeech}}
	srv := newPlane(t, svc, registry{"tts": tts})
	speak := func(body map[string]any) *testkit.Response { return srv.Do(http.MethodPost, "/v1/audio/speech", body) }

	resp := speak(map[string]any{"model": "tts", "input": "The quick brown fox jumps over the lazy dog.", "voice": "alloy"})
	if resp.Status != http.StatusOK || resp.Header.Get("Content-Type") != "audio/wav" {
		t.Fatalf("speech = %d %s %.200s", resp.Status, resp.Header.Get("Content-Type"), resp.Body)
	}
	checkWAV(t, resp.Body)
	// Input that looks like options is spoken, not parsed: it goes on stdin.
	resp = speak(map[string]any{"model": "tts", "input": "--help -w /tmp/x.wav is spoken as text", "voice": "en-us"})
	if resp.Status != http.StatusOK {
		t.Fatalf("dash input = %d %s", resp.Status, resp.Body)
	}
	checkWAV(t, resp.Body)
	// A voice espeak-ng does not have: 502 speech_failed suggesting to rephrase.
	resp = speak(map[string]any{"model": "tts", "input": "hello", "voice": "nosuchvoice"})
	if resp.Status != http.StatusBadGateway || resp.ErrorCode() != "speech_failed" || !strings.Contains(string(resp.Body), "rephras") || !strings.Contains(string(resp.Body), "voice does not exist") {
		t.Fatalf("unknown voice = %d %s", resp.Status, resp.Body)
	}
	for name, body := range map[string]map[string]any{
		"voice as option": {"model": "tts", "input": "hello", "voice": "-w/tmp/x"},
		"empty input":     {"model": "tts", "input": "  ", "voice": "alloy"},
		"mp3":             {"model": "tts", "input": "hello", "voice": "alloy", "response_format": "mp3"},
		"too long":        {"model": "tts", "input": strings.Repeat("a", engines.MaxSpeechInput+1)},
	} {
		if resp := speak(body); resp.Status != http.StatusBadRequest {
			t.Fatalf("%s = %d %s", name, resp.Status, resp.Body)
		}
	}
	if len(svc.Resident()) != 0 {
		t.Fatalf("espeak-ng left something resident: %+v", svc.Resident())
	}
	if st := svc.State(context.Background(), tts); st.State != models.StateReady {
		t.Fatalf("espeak state = %+v", st)
	}
}

// TestSpeechFailureIsSpeechFailed runs a stand-in espeak-ng that exits 0 with no audio.
func TestSpeechFailureIsSpeechFailed(t *testing.T) {
	stand, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no `true` program on PATH to stand in for espeak-ng")
	}
	svc := engines.New(engines.Options{LookPath: func(name string) (string, error) { return stand, nil }})
	t.Cleanup(func() { _ = svc.Close() })
	tts := &models.Model{ID: "tts", Binding: models.BindingEspeakNg, Voice: "en", Revision: 1, Modalities: []models.Modality{models.ModalitySpeech}}
	srv := newPlane(t, svc, registry{"tts": tts})
	resp := srv.Do(http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts", "input": "hello", "voice": "alloy"})
	if resp.Status != http.StatusBadGateway || resp.ErrorCode() != "speech_failed" || !strings.Contains(string(resp.Body), "no audio") {
		t.Fatalf("empty synthesis = %d %s", resp.Status, resp.Body)
	}
}

// TestImagesWithStandInSD runs sd once per request (a stand-in: stable-diffusion.cpp does
// not install from Debian's packages here).
func TestImagesWithStandInSD(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sd := filepath.Join(t.TempDir(), "sd")
	if err := os.Symlink(exe, sd); err != nil {
		t.Fatal(err)
	}
	svc := engines.New(engines.Options{LookPath: func(name string) (string, error) { return sd, nil }})
	t.Cleanup(func() { _ = svc.Close() })
	m := llamaModel(t, "img")
	m.Binding, m.Modalities, m.Args, m.CtxSize = models.BindingStableDiffusionCpp, []models.Modality{models.ModalityImages}, nil, 0
	srv := newPlane(t, svc, registry{"img": m})
	resp := srv.Do(http.MethodPost, "/v1/images/generations", map[string]any{"model": "img", "prompt": "-a red fox", "n": 2, "size": "256x256"})
	var out struct {
		Data []struct {
			B64 string `json:"b64_json"`
		} `json:"data"`
	}
	resp.JSON(t, &out)
	if resp.Status != http.StatusOK || len(out.Data) != 2 {
		t.Fatalf("images = %d %s", resp.Status, resp.Body)
	}
	for _, d := range out.Data {
		b, err := base64.StdEncoding.DecodeString(d.B64)
		if err != nil || !bytes.Equal(b, enginetest.PNG("-a red fox")) {
			t.Fatalf("image = %q %v", b, err)
		}
	}
	resp = srv.Do(http.MethodPost, "/v1/images/generations", map[string]any{"model": "img", "prompt": "fail"})
	if resp.Status != http.StatusBadGateway || !strings.Contains(string(resp.Body), "new_sd_ctx_t failed") {
		t.Fatalf("failing sd = %d %s", resp.Status, resp.Body)
	}
	for name, body := range map[string]map[string]any{
		"bad size":  {"model": "img", "prompt": "x", "size": "100x7"},
		"n zero":    {"model": "img", "prompt": "x", "n": 0},
		"no prompt": {"model": "img"},
	} {
		if resp := srv.Do(http.MethodPost, "/v1/images/generations", body); resp.Status != http.StatusBadRequest {
			t.Fatalf("%s = %d %s", name, resp.Status, resp.Body)
		}
	}
}

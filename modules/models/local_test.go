package models_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/models"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
)

func TestLocalBindingValidation(t *testing.T) {
	n := func(v int) *int { return &v }
	ok := []struct {
		name string
		spec models.Spec
		want func(*models.Model) bool
	}{
		{"llama defaults", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "/models/q.gguf"}, func(m *models.Model) bool {
			return slices.Equal(m.Modalities, []models.Modality{models.ModalityChat}) && m.ModelPath == "/models/q.gguf"
		}},
		{"llama args and ctx", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "/models/../models/q.gguf", Args: []string{"--n-gpu-layers", "99"}, CtxSize: n(4096), Modalities: []models.Modality{models.ModalityChat}}, func(m *models.Model) bool {
			return m.CtxSize == 4096 && len(m.Args) == 2 && m.ModelPath == "/models/q.gguf" && len(m.Modalities) == 1
		}},
		{"whisper", models.Spec{Binding: models.BindingWhisperCpp, ModelPath: "/m/ggml-base.en.bin"}, func(m *models.Model) bool {
			return slices.Equal(m.Modalities, []models.Modality{models.ModalityTranscription})
		}},
		{"sd", models.Spec{Binding: models.BindingStableDiffusionCpp, ModelPath: "/m/sd.safetensors"}, func(m *models.Model) bool {
			return slices.Equal(m.Modalities, []models.Modality{models.ModalityImages})
		}},
		{"espeak default voice", models.Spec{Binding: models.BindingEspeakNg}, func(m *models.Model) bool { return m.Voice == "en" }},
		{"espeak voice", models.Spec{Binding: models.BindingEspeakNg, Voice: "en+f3"}, func(m *models.Model) bool { return m.Voice == "en+f3" }},
	}
	for _, c := range ok {
		m, err := c.spec.Validate("local")
		if err != nil || !c.want(m) {
			t.Fatalf("%s: %+v, %v", c.name, m, err)
		}
	}
	bad := []struct {
		name string
		spec models.Spec
		code string
	}{
		{"llama without modelPath", models.Spec{Binding: models.BindingLlamaCpp}, "invalid_model"},
		{"relative modelPath", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "q.gguf"}, "invalid_model"},
		{"NUL in modelPath", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "/q\x00.gguf"}, "invalid_model"},
		{"baseUrl on local", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "/q.gguf", BaseURL: "http://x/v1"}, "invalid_model"},
		{"credential on local", models.Spec{Binding: models.BindingEspeakNg, CredentialRef: "secret://K"}, "invalid_model"},
		{"port arg", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "/q.gguf", Args: []string{"--port=9"}}, "invalid_model"},
		{"model arg", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "/q.gguf", Args: []string{"-m"}}, "invalid_model"},
		{"args on whisper", models.Spec{Binding: models.BindingWhisperCpp, ModelPath: "/w.bin", Args: []string{"-t"}}, "invalid_model"},
		{"ctx zero", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "/q.gguf", CtxSize: n(0)}, "invalid_model"},
		{"ctx on sd", models.Spec{Binding: models.BindingStableDiffusionCpp, ModelPath: "/s", CtxSize: n(8)}, "invalid_model"},
		{"chat on whisper", models.Spec{Binding: models.BindingWhisperCpp, ModelPath: "/w.bin", Modalities: []models.Modality{models.ModalityChat}}, "invalid_modality"},
		{"speech on llama", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "/q.gguf", Modalities: []models.Modality{models.ModalitySpeech}}, "invalid_modality"},
		{"voice starting with dash", models.Spec{Binding: models.BindingEspeakNg, Voice: "-w"}, "invalid_model"},
		{"modelPath on espeak", models.Spec{Binding: models.BindingEspeakNg, ModelPath: "/x"}, "invalid_model"},
		{"voice on llama", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "/q.gguf", Voice: "en"}, "invalid_model"},
		{"modelPath on hosted", models.Spec{Binding: models.BindingHostedCompatible, BaseURL: "https://x/v1", Model: "m", ModelPath: "/q"}, "invalid_model"},
		{"maxTokens zero", models.Spec{Binding: models.BindingLlamaCpp, ModelPath: "/q.gguf", MaxTokens: n(0)}, "invalid_max_tokens"},
	}
	for _, c := range bad {
		_, err := c.spec.Validate("local")
		if e := apperr.From(err); e == nil || e.Code != c.code || e.Status != 400 {
			t.Fatalf("%s: %v, want %s", c.name, err, c.code)
		}
	}
}

// TestLocalRegistrationRoundTrip stores a local binding and reads it back with its live
// state: the engine binary is absent here, so the state says unavailable with the hint.
func TestLocalRegistrationRoundTrip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db)
		resp := s.srv.Do(http.MethodPut, "/admin/models/qwen", map[string]any{"binding": "llama.cpp", "modelPath": "/models/qwen.gguf", "args": []string{"--n-gpu-layers", "99"}, "ctxSize": 2048})
		if resp.Status != http.StatusCreated {
			t.Fatalf("put = %d %s", resp.Status, resp.Body)
		}
		var v struct {
			models.Model
			State       string `json:"state"`
			StateDetail string `json:"stateDetail"`
		}
		s.srv.Do(http.MethodGet, "/admin/models/qwen", nil).JSON(t, &v)
		if v.ModelPath != "/models/qwen.gguf" || v.CtxSize != 2048 || len(v.Args) != 2 || v.State != models.StateUnavailable || !strings.Contains(v.StateDetail, "llama-server is not installed") {
			t.Fatalf("get = %+v", v)
		}
		if resp := s.srv.Do(http.MethodPost, "/admin/models/qwen:warm", nil); resp.Status != http.StatusServiceUnavailable || resp.ErrorCode() != "engine_unavailable" {
			t.Fatalf("warm without engine = %d %s", resp.Status, resp.Body)
		}
		if resp := s.srv.Do(http.MethodPut, "/admin/models/tts", map[string]any{"binding": "espeak-ng", "voice": "-x"}); resp.Status != http.StatusBadRequest || resp.ErrorCode() != "invalid_model" {
			t.Fatalf("bad voice = %d %s", resp.Status, resp.Body)
		}
		if resp := s.srv.Do(http.MethodDelete, "/admin/models/qwen", nil); resp.Status != http.StatusNoContent {
			t.Fatalf("delete = %d %s", resp.Status, resp.Body)
		}
	})
}

// FuzzLocalSpec validates arbitrary local registrations: never a panic, every refusal a
// 400 with a code, and every accepted one keeps the invariants the engines rely on.
func FuzzLocalSpec(f *testing.F) {
	f.Add("llama.cpp", "/m/q.gguf", "--n-gpu-layers", "", 512)
	f.Add("espeak-ng", "", "", "en+f3", 0)
	f.Add("whisper.cpp", "rel/path", "", "", -1)
	f.Add("espeak-ng", "", "", "-w", 0)
	f.Add("stable-diffusion.cpp", "/a/../b", "--port=1", "", 0)
	f.Fuzz(func(t *testing.T, binding, path, arg, voice string, ctx int) {
		spec := models.Spec{Binding: models.Binding(binding), ModelPath: path, Voice: voice}
		if arg != "" {
			spec.Args = []string{arg}
		}
		if ctx != 0 {
			spec.CtxSize = &ctx
		}
		m, err := spec.Validate("fuzz")
		if err != nil {
			if e := apperr.From(err); e == nil || e.Status != 400 {
				t.Fatalf("refusal is not a 400: %v", err)
			}
			return
		}
		if !models.IsLocal(m.Binding) {
			return
		}
		if m.Binding == models.BindingEspeakNg && !models.ValidVoice(m.Voice) {
			t.Fatalf("accepted voice %q", m.Voice)
		}
		if m.Binding != models.BindingEspeakNg && !strings.HasPrefix(m.ModelPath, "/") {
			t.Fatalf("accepted modelPath %q", m.ModelPath)
		}
		if len(m.Modalities) == 0 {
			t.Fatal("no modalities")
		}
	})
}

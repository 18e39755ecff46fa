// Package models is the inference plane's registry of logical model ids: each id maps to a
// binding (a hosted OpenAI-compatible endpoint now; local engines later), with live state,
// warm/evict through the engines, and an active capabilities probe.
package models

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/modules/credentials"
)

// Binding is the kind of backend a logical id is served by.
type Binding string

// Bindings this build knows. Local-engine bindings (llama.cpp, whisper.cpp, …) are added
// here, with their validation in Spec.Validate and their runtime in the engines module.
const (
	// BindingHostedCompatible is any remote OpenAI-compatible server.
	BindingHostedCompatible Binding = "hosted-compatible"
	// BindingLlamaCpp is a GGUF model served by a supervised llama-server (chat, embeddings).
	BindingLlamaCpp Binding = "llama.cpp"
	// BindingWhisperCpp is a whisper model served by a supervised whisper-server (transcription).
	BindingWhisperCpp Binding = "whisper.cpp"
	// BindingStableDiffusionCpp is a diffusion model run by the sd program per request (images).
	BindingStableDiffusionCpp Binding = "stable-diffusion.cpp"
	// BindingEspeakNg is text-to-speech by the espeak-ng program per request (speech).
	BindingEspeakNg Binding = "espeak-ng"
)

// KnownBindings lists the accepted binding values, for error messages and docs.
func KnownBindings() []Binding {
	return []Binding{BindingHostedCompatible, BindingLlamaCpp, BindingWhisperCpp, BindingStableDiffusionCpp, BindingEspeakNg}
}

// LocalModalities are the modalities a local binding can serve (nil for hosted bindings,
// which may serve any).
func LocalModalities(b Binding) []Modality {
	switch b {
	case BindingLlamaCpp:
		return []Modality{ModalityChat, ModalityEmbeddings}
	case BindingWhisperCpp:
		return []Modality{ModalityTranscription}
	case BindingStableDiffusionCpp:
		return []Modality{ModalityImages}
	case BindingEspeakNg:
		return []Modality{ModalitySpeech}
	}
	return nil
}

// IsLocal reports whether b runs on this machine (an engine process) rather than remotely.
func IsLocal(b Binding) bool { return LocalModalities(b) != nil }

// Modality is one kind of /v1 request a model serves.
type Modality string

// Modalities of the data plane.
const (
	ModalityChat          Modality = "chat"
	ModalityEmbeddings    Modality = "embeddings"
	ModalityTranscription Modality = "transcription"
	ModalitySpeech        Modality = "speech"
	ModalityImages        Modality = "images"
)

// AllModalities lists every modality in a stable order.
func AllModalities() []Modality {
	return []Modality{ModalityChat, ModalityEmbeddings, ModalityTranscription, ModalitySpeech, ModalityImages}
}

// MaxMaxTokens bounds maxTokens to something any model could mean.
const MaxMaxTokens = 10_000_000

// idPattern is the logical id format. A "/" is allowed (provider-style ids such as
// org/model); in a URL path it must be percent-encoded as %2F. A ":" is allowed too (tags
// such as qwen2.5:7b): the action routes split {id}:warm on the last colon.
var idPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:/-]{0,127}$`)

// ValidID reports whether id is a well-formed logical id.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Spec is a registration as sent to PUT /admin/models/{id}.
type Spec struct {
	// ID may be sent in the body (e.g. from a file); it must then equal the path id.
	ID            string     `json:"id,omitempty"`
	Binding       Binding    `json:"binding"`
	BaseURL       string     `json:"baseUrl,omitempty"`
	Model         string     `json:"model,omitempty"`
	CredentialRef string     `json:"credentialRef,omitempty"`
	MaxTokens     *int       `json:"maxTokens,omitempty"`
	Modalities    []Modality `json:"modalities,omitempty"`
	// ModelPath, Args and CtxSize configure llama.cpp, whisper.cpp and stable-diffusion.cpp.
	ModelPath string   `json:"modelPath,omitempty"`
	Args      []string `json:"args,omitempty"`
	CtxSize   *int     `json:"ctxSize,omitempty"`
	// Voice is the espeak-ng voice (default "en").
	Voice string `json:"voice,omitempty"`
}

// Model is a registered logical id.
type Model struct {
	ID      string  `json:"id"`
	Binding Binding `json:"binding"`
	// BaseURL of a hosted binding, including its API prefix (usually …/v1), no trailing slash.
	BaseURL string `json:"baseUrl,omitempty"`
	// Model is the provider-side model name sent upstream.
	Model string `json:"model,omitempty"`
	// CredentialRef is secret://NAME; resolve it with the credentials service.
	CredentialRef string `json:"credentialRef,omitempty"`
	// MaxTokens caps max_tokens of requests (0 = no cap).
	MaxTokens int `json:"maxTokens,omitempty"`
	// Modalities the model is registered for; empty means not declared (the upstream decides).
	Modalities []Modality `json:"modalities,omitempty"`
	// ModelPath is the model file of a local binding (absolute path).
	ModelPath string `json:"modelPath,omitempty"`
	// Args are extra llama-server arguments.
	Args []string `json:"args,omitempty"`
	// CtxSize is llama-server's --ctx-size (0 = its default).
	CtxSize int `json:"ctxSize,omitempty"`
	// Voice is the espeak-ng voice.
	Voice string `json:"voice,omitempty"`
	// Revision grows on every replace.
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Supports reports whether m declares modality, or declares none (hosted models whose
// modalities are not declared leave the decision to the upstream).
func (m *Model) Supports(modality Modality) bool {
	return len(m.Modalities) == 0 || slices.Contains(m.Modalities, modality)
}

// Validate checks s for the logical id and normalises it into a Model (without timestamps).
// Every failure is a 400 with a named code.
func (s *Spec) Validate(id string) (*Model, error) {
	if !ValidID(id) {
		return nil, ErrInvalidModelID.Msg("logical id must match [a-zA-Z0-9][a-zA-Z0-9._:/-]{0,127} (encode / as %%2F in the URL path)")
	}
	if s.ID != "" && s.ID != id {
		return nil, ErrInvalidModelID.Msg("body id %q differs from the path id %q", s.ID, id)
	}
	m := &Model{ID: id, Binding: s.Binding}
	switch s.Binding {
	case "":
		return nil, ErrUnknownBinding.Msg("binding is required (one of: %s)", bindingList())
	case BindingHostedCompatible:
	default:
		if !IsLocal(s.Binding) {
			return nil, ErrUnknownBinding.Msg("binding %q is not known (one of: %s)", clip(string(s.Binding)), bindingList())
		}
		return s.validateLocal(m)
	}
	if s.ModelPath != "" || len(s.Args) > 0 || s.CtxSize != nil || s.Voice != "" {
		return nil, ErrInvalidModel.Msg("modelPath, args, ctxSize and voice are for local bindings, not %s", s.Binding)
	}
	base, err := validBaseURL(s.BaseURL)
	if err != nil {
		return nil, err
	}
	m.BaseURL = base
	m.Model = strings.TrimSpace(s.Model)
	if m.Model == "" {
		return nil, ErrInvalidModel.Msg("model (the provider-side model name) is required for binding %s", s.Binding)
	}
	if len(m.Model) > 256 {
		return nil, ErrInvalidModel.Msg("model is longer than 256 characters")
	}
	if s.CredentialRef != "" {
		if _, err := credentials.ParseRef(s.CredentialRef); err != nil {
			// The value is not echoed: a pasted API key is the usual mistake.
			return nil, ErrInvalidCredentialRef.Msg("credentialRef must be secret://NAME (NAME: letters, digits, underscores; not starting with a digit); put the key itself in PUT /admin/credentials/{name}")
		}
		m.CredentialRef = s.CredentialRef
	}
	if s.MaxTokens != nil {
		if *s.MaxTokens <= 0 || *s.MaxTokens > MaxMaxTokens {
			return nil, ErrInvalidMaxTokens.Msg("maxTokens must be an integer from 1 to %d", MaxMaxTokens)
		}
		m.MaxTokens = *s.MaxTokens
	}
	for _, mod := range s.Modalities {
		if !slices.Contains(AllModalities(), mod) {
			return nil, ErrInvalidModality.Msg("modality %q is not one of: chat, embeddings, transcription, speech, images", clip(string(mod)))
		}
		if slices.Contains(m.Modalities, mod) {
			return nil, ErrInvalidModality.Msg("modality %q is listed twice", mod)
		}
		m.Modalities = append(m.Modalities, mod)
	}
	return m, nil
}

func validBaseURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", ErrInvalidBaseURL.Msg("baseUrl is required for binding hosted-compatible (e.g. https://api.openai.com/v1)")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "", ErrInvalidBaseURL.Msg("baseUrl must be an absolute http:// or https:// URL such as https://api.openai.com/v1")
	}
	if u.User != nil {
		// Not echoed, and refused: a URL is shown in listings and logs, a secret must not be.
		return "", ErrInvalidBaseURL.Msg("baseUrl must not carry user info; store the key with PUT /admin/credentials/{name} and set credentialRef")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", ErrInvalidBaseURL.Msg("baseUrl must not have a query or fragment")
	}
	if len(raw) > 2048 {
		return "", ErrInvalidBaseURL.Msg("baseUrl is longer than 2048 characters")
	}
	return strings.TrimRight(raw, "/"), nil
}

func bindingList() string {
	var s []string
	for _, b := range KnownBindings() {
		s = append(s, string(b))
	}
	return strings.Join(s, ", ")
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return fmt.Sprint(s)
}

// Bounds of local-binding fields.
const (
	maxArgs      = 64
	maxArgLen    = 4096
	maxCtxSize   = 10_000_000
	maxPathLen   = 4096
	defaultVoice = "en"
)

// voicePattern is an espeak-ng voice name (en, en-us, mb-en1, en+f3). It never starts with
// "-": the voice is passed as the argument of -v.
var voicePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_+/-]{0,63}$`)

// ValidVoice reports whether v is a well-formed espeak-ng voice name.
func ValidVoice(v string) bool { return voicePattern.MatchString(v) }

// validateLocal checks a local binding. The model file is checked for an absolute, clean
// path here; whether it exists is reported in the live state (it may be copied in after
// registration, or removed later), not refused.
func (s *Spec) validateLocal(m *Model) (*Model, error) {
	if s.BaseURL != "" || s.CredentialRef != "" {
		return nil, ErrInvalidModel.Msg("baseUrl and credentialRef are for hosted-compatible models; binding %s runs on this machine", s.Binding)
	}
	m.Model = strings.TrimSpace(s.Model)
	if len(m.Model) > 256 {
		return nil, ErrInvalidModel.Msg("model is longer than 256 characters")
	}
	if s.MaxTokens != nil {
		if *s.MaxTokens <= 0 || *s.MaxTokens > MaxMaxTokens {
			return nil, ErrInvalidMaxTokens.Msg("maxTokens must be an integer from 1 to %d", MaxMaxTokens)
		}
		m.MaxTokens = *s.MaxTokens
	}
	allowed := LocalModalities(s.Binding)
	for _, mod := range s.Modalities {
		if !slices.Contains(allowed, mod) {
			return nil, ErrInvalidModality.Msg("binding %s serves %s, not %q", s.Binding, modalityList(allowed), clip(string(mod)))
		}
		if slices.Contains(m.Modalities, mod) {
			return nil, ErrInvalidModality.Msg("modality %q is listed twice", mod)
		}
		m.Modalities = append(m.Modalities, mod)
	}
	if len(m.Modalities) == 0 {
		m.Modalities = slices.Clone(allowed)
		// llama-server serves embeddings only when started with --embeddings, which recent
		// builds reserve for embedding models: a llama.cpp model is a chat model unless it
		// says otherwise.
		if s.Binding == BindingLlamaCpp {
			m.Modalities = []Modality{ModalityChat}
		}
	}
	if s.Binding == BindingEspeakNg {
		if s.ModelPath != "" || len(s.Args) > 0 || s.CtxSize != nil {
			return nil, ErrInvalidModel.Msg("binding espeak-ng takes voice only (no modelPath, args or ctxSize)")
		}
		m.Voice = defaultVoice
		if s.Voice != "" {
			if !ValidVoice(s.Voice) {
				return nil, ErrInvalidModel.Msg("voice must be an espeak-ng voice name such as en, en-us or en+f3 (see espeak-ng --voices)")
			}
			m.Voice = s.Voice
		}
		return m, nil
	}
	if s.Voice != "" {
		return nil, ErrInvalidModel.Msg("voice is for binding espeak-ng, not %s", s.Binding)
	}
	if s.ModelPath == "" {
		return nil, ErrInvalidModel.Msg("modelPath (the absolute path of the model file on the inference host) is required for binding %s", s.Binding)
	}
	if len(s.ModelPath) > maxPathLen || !filepath.IsAbs(s.ModelPath) || strings.ContainsRune(s.ModelPath, 0) || !utf8.ValidString(s.ModelPath) {
		return nil, ErrInvalidModel.Msg("modelPath must be an absolute file path on the inference host")
	}
	m.ModelPath = filepath.Clean(s.ModelPath)
	if len(s.Args) > 0 && s.Binding != BindingLlamaCpp {
		return nil, ErrInvalidModel.Msg("args are for binding llama.cpp only")
	}
	if len(s.Args) > maxArgs {
		return nil, ErrInvalidModel.Msg("at most %d args", maxArgs)
	}
	for _, a := range s.Args {
		if len(a) > maxArgLen || strings.ContainsRune(a, 0) || !utf8.ValidString(a) {
			return nil, ErrInvalidModel.Msg("each arg must be valid text of at most %d bytes without NUL", maxArgLen)
		}
		// The supervisor owns where the server listens and which model it loads.
		switch strings.SplitN(a, "=", 2)[0] {
		case "--host", "--port", "-m", "--model", "--ctx-size", "-c":
			return nil, ErrInvalidModel.Msg("arg %q is set by the supervisor (use modelPath and ctxSize)", clip(a))
		}
	}
	m.Args = slices.Clone(s.Args)
	if s.CtxSize != nil {
		if s.Binding != BindingLlamaCpp {
			return nil, ErrInvalidModel.Msg("ctxSize is for binding llama.cpp only")
		}
		if *s.CtxSize <= 0 || *s.CtxSize > maxCtxSize {
			return nil, ErrInvalidModel.Msg("ctxSize must be an integer from 1 to %d", maxCtxSize)
		}
		m.CtxSize = *s.CtxSize
	}
	return m, nil
}

func modalityList(ms []Modality) string {
	var s []string
	for _, m := range ms {
		s = append(s, string(m))
	}
	return strings.Join(s, ", ")
}

package dataplane

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// BindingHosted is the binding of a remote OpenAI-compatible server.
const BindingHosted = "hosted-compatible"

// Target is a registered logical id as the data plane needs it: where its requests go and
// how they are rewritten. The composition root adapts the model registry to it.
type Target struct {
	LogicalID     string
	Binding       string // BindingHosted, later local engine bindings
	BaseURL       string // e.g. https://api.example.com/v1 (the paths below it are OpenAI's)
	Model         string // provider-side model name
	MaxTokens     int    // 0 = no cap
	CredentialRef string // "secret://NAME" or empty
	// Modalities the model is registered for (chat, embeddings, transcription, speech,
	// images); empty = not declared, the upstream decides.
	Modalities []string
	CreatedAt  time.Time
}

// Modalities of the data plane's endpoints.
const (
	ModalityChat          = "chat"
	ModalityEmbeddings    = "embeddings"
	ModalityTranscription = "transcription"
	ModalitySpeech        = "speech"
	ModalityImages        = "images"
)

// supports reports whether t serves modality (undeclared modalities are left to the upstream).
func (t Target) supports(modality string) bool {
	if len(t.Modalities) == 0 {
		return true
	}
	for _, m := range t.Modalities {
		if m == modality {
			return true
		}
	}
	return false
}

// Models is the registry as seen by the data plane. Lookup returns an error matching
// ErrModelNotFound (by code) for an id that is not registered.
type Models interface {
	Lookup(ctx context.Context, id string) (Target, error)
	List(ctx context.Context) ([]Target, error)
}

// Credentials resolves a credentialRef to its value. Failures should carry the
// credential_error code; the value never appears in an error.
type Credentials interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

// Upstream is where one request goes once its target is bound.
type Upstream struct {
	BaseURL   string // OpenAI-style base, paths such as /chat/completions are appended
	Model     string // provider-side model name written into the request
	Bearer    string // Authorization bearer token for the upstream; empty = none
	MaxTokens int    // cap for max_tokens / max_completion_tokens; 0 = none
	// Release is called once when the request is finished (for residency accounting of
	// local engines); may be nil.
	Release func()
	// Transport, when set, carries the request instead of the module's pooled transport:
	// local engines that run once per request (espeak-ng) answer in-process through it.
	Transport http.RoundTripper
}

// Binding turns a registered target into an upstream for one request. Hosted-compatible
// targets resolve their credential; a local engine binding will acquire a resident engine
// process (and release it in Upstream.Release).
type Binding interface {
	Acquire(ctx context.Context, t Target) (*Upstream, error)
}

// HostedBinding binds hosted-compatible targets: the base URL as registered, the
// credential as bearer token.
type HostedBinding struct {
	Credentials Credentials
}

// Acquire resolves the target's credential, if any.
func (h HostedBinding) Acquire(ctx context.Context, t Target) (*Upstream, error) {
	u := &Upstream{BaseURL: t.BaseURL, Model: t.Model, MaxTokens: t.MaxTokens}
	if t.CredentialRef == "" {
		return u, nil
	}
	if h.Credentials == nil {
		return nil, ErrCredential.Msg("credential %s cannot be resolved: no credential store configured", t.CredentialRef)
	}
	v, err := h.Credentials.Resolve(ctx, t.CredentialRef)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ErrClientGone.Wrap(ctx.Err())
		}
		if errors.Is(err, ErrCredential) {
			return nil, err
		}
		// The cause is kept for the log only; it must not carry the value (the resolver
		// never puts it there), and the message names the ref alone.
		return nil, ErrCredential.Msg("credential %s could not be resolved", t.CredentialRef).Wrap(err)
	}
	if v == "" {
		return nil, ErrCredential.Msg("credential %s resolved to an empty value", t.CredentialRef)
	}
	u.Bearer = v
	return u, nil
}

package models

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// ProbeMethod names how capabilities were found, so that clients can tell probed facts from
// declared ones.
const ProbeMethod = "active-probe"

// Capabilities is what a probe found out about a model. A nil field means the probe could
// not tell (see Probes for why).
type Capabilities struct {
	ID       string  `json:"id"`
	Binding  Binding `json:"binding"`
	Revision int64   `json:"revision"`
	// ToolCalling: the upstream accepted a request with a tools array (true even if the
	// model chose not to call the tool), or refused it with a 4xx (false).
	ToolCalling *bool `json:"toolCalling"`
	// Vision: the upstream answered a message with an image_url part (true) or refused it.
	Vision *bool `json:"vision"`
	// Reasoning: the chat answer carried reasoning_content / reasoning text or reasoning tokens.
	Reasoning *bool `json:"reasoning"`
	// MaxContext comes from the upstream's /models entry when it reports one.
	MaxContext *int `json:"maxContext"`
	// Modalities are the registered ones, or, when none are registered, those that answered.
	Modalities []Modality `json:"modalities"`
	Method     string     `json:"method"`
	Probes     []Probe    `json:"probes"`
	ProbedAt   time.Time  `json:"probedAt"`
	// Cached is true when this answer was served from the cache.
	Cached bool `json:"cached"`
}

// Probe is one request of a capabilities probe.
type Probe struct {
	Name string `json:"name"`
	// Status is the upstream's HTTP status (absent when it could not be reached).
	Status int `json:"status,omitempty"`
	// Result is supported, unsupported, unknown or skipped.
	Result string `json:"result"`
	Note   string `json:"note,omitempty"`
}

// Probe results.
const (
	ResultSupported   = "supported"
	ResultUnsupported = "unsupported"
	ResultUnknown     = "unknown"
	ResultSkipped     = "skipped"
)

// maxProbeBody bounds what is read of an upstream answer.
const maxProbeBody = 1 << 20

// probeMaxTokens keeps probes cheap; reasoning shows up in the first tokens.
const probeMaxTokens = 32

type cacheEntry struct {
	revision int64
	caps     Capabilities
}

type prober struct {
	creds   CredentialResolver
	client  *http.Client
	timeout time.Duration
	group   singleflight.Group
	mu      sync.Mutex
	cache   map[string]cacheEntry
}

func newProber(creds CredentialResolver, timeout time.Duration) *prober {
	return &prober{
		creds:   creds,
		client:  &http.Client{Timeout: timeout},
		timeout: timeout,
		cache:   map[string]cacheEntry{},
	}
}

func (p *prober) forget(id string) {
	p.mu.Lock()
	delete(p.cache, id)
	p.mu.Unlock()
}

func (p *prober) capabilities(ctx context.Context, m *Model, refresh bool) (*Capabilities, error) {
	if !refresh {
		p.mu.Lock()
		e, ok := p.cache[m.ID]
		p.mu.Unlock()
		if ok && e.revision == m.Revision {
			c := e.caps
			c.Cached = true
			return &c, nil
		}
	}
	key := fmt.Sprintf("%s@%d", m.ID, m.Revision)
	ch := p.group.DoChan(key, func() (any, error) {
		// Detached from the first caller so that its going away does not fail the callers
		// that joined; bounded by the per-request timeouts of the steps.
		c, err := p.probe(context.WithoutCancel(ctx), m)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		if cur, ok := p.cache[m.ID]; !ok || cur.revision <= m.Revision {
			p.cache[m.ID] = cacheEntry{revision: m.Revision, caps: *c}
		}
		p.mu.Unlock()
		return c, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		c := *r.Val.(*Capabilities)
		return &c, nil
	}
}

// probe runs the probe steps against a hosted-compatible upstream.
func (p *prober) probe(ctx context.Context, m *Model) (*Capabilities, error) {
	caps := &Capabilities{ID: m.ID, Binding: m.Binding, Revision: m.Revision, Method: ProbeMethod, ProbedAt: time.Now().UTC()}
	if m.Binding != BindingHostedCompatible {
		return nil, ErrUnknownBinding.Msg("binding %q cannot be probed", m.Binding)
	}
	key := ""
	if m.CredentialRef != "" {
		v, err := p.creds.ResolveRef(ctx, m.CredentialRef)
		if err != nil {
			return nil, err
		}
		key = v
	}
	r := &run{ctx: ctx, p: p, m: m, key: key, maxParam: "max_tokens"}

	// 1. Max context from the upstream's model list.
	caps.MaxContext = r.maxContext(caps)

	declared := len(m.Modalities) > 0
	var detected []Modality
	if !declared || slices.Contains(m.Modalities, ModalityChat) {
		// 2. A tiny chat: does the model answer, and does it reason?
		ok, reasoning, err := r.chat(caps)
		if err != nil {
			return nil, err
		}
		if ok {
			detected = append(detected, ModalityChat)
			caps.Reasoning = &reasoning
			// 3. Tools and 4. vision, only for a model that chats.
			caps.ToolCalling = r.tools(caps)
			caps.Vision = r.vision(caps)
		} else {
			caps.Probes = append(caps.Probes, Probe{Name: "tools", Result: ResultSkipped, Note: "the model did not answer a chat request"},
				Probe{Name: "vision", Result: ResultSkipped, Note: "the model did not answer a chat request"})
		}
	} else {
		caps.Probes = append(caps.Probes, Probe{Name: "chat", Result: ResultSkipped, Note: "chat is not among the registered modalities"})
	}
	if !declared {
		// 5. Embeddings, to report modalities when none are registered.
		if r.embeddings(caps) {
			detected = append(detected, ModalityEmbeddings)
		}
	}
	if !r.answered {
		if r.timedOut {
			return nil, ErrUpstreamTimeout.Msg("upstream %s did not answer within %s", m.BaseURL, p.timeout)
		}
		return nil, ErrUpstreamUnreachable.Msg("upstream %s could not be reached", m.BaseURL)
	}
	if declared {
		caps.Modalities = slices.Clone(m.Modalities)
	} else {
		caps.Modalities = detected
	}
	if caps.Modalities == nil {
		caps.Modalities = []Modality{}
	}
	return caps, nil
}

// run is one probe in progress.
type run struct {
	ctx      context.Context
	p        *prober
	m        *Model
	key      string
	maxParam string // max_tokens, or max_completion_tokens for upstreams that refuse it
	answered bool   // any HTTP answer at all
	timedOut bool
}

type answer struct {
	status int
	body   []byte
}

// do sends one request; err is a transport failure (the answer's status is not an error).
func (r *run) do(ctx context.Context, method, path string, body any) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, r.p.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.m.BaseURL+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	resp, err := r.p.client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			r.timedOut = true
		}
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if err != nil {
		return nil, err
	}
	r.answered = true
	return &answer{status: resp.StatusCode, body: raw}, nil
}

func ok2xx(s int) bool { return s >= 200 && s < 300 }

func (r *run) maxContext(caps *Capabilities) *int {
	a, err := r.do(r.ctx, http.MethodGet, "/models", nil)
	if err != nil {
		caps.Probes = append(caps.Probes, Probe{Name: "models", Result: ResultUnknown, Note: "upstream unreachable"})
		return nil
	}
	if !ok2xx(a.status) {
		caps.Probes = append(caps.Probes, Probe{Name: "models", Status: a.status, Result: ResultUnknown, Note: "the upstream's model list answered an error"})
		return nil
	}
	n, found := contextFromModelList(a.body, r.m.Model)
	switch {
	case n != nil:
		caps.Probes = append(caps.Probes, Probe{Name: "models", Status: a.status, Result: ResultSupported, Note: "max context from the upstream's model entry"})
	case found:
		caps.Probes = append(caps.Probes, Probe{Name: "models", Status: a.status, Result: ResultUnknown, Note: "the model entry reports no context length"})
	default:
		caps.Probes = append(caps.Probes, Probe{Name: "models", Status: a.status, Result: ResultUnknown, Note: "the model is not in the upstream's model list"})
	}
	return n
}

// contextFromModelList finds model in an OpenAI-style {data:[…]} list and reads the context
// length under the names servers use (vLLM max_model_len, OpenRouter context_length and
// top_provider.context_length, llama.cpp meta.n_ctx_train, others context_window).
func contextFromModelList(body []byte, model string) (*int, bool) {
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil {
		return nil, false
	}
	for _, e := range list.Data {
		if id, _ := e["id"].(string); id != model {
			continue
		}
		for _, k := range []string{"context_length", "max_model_len", "context_window", "max_context_length", "max_context", "n_ctx"} {
			if n, ok := positiveInt(e[k]); ok {
				return &n, true
			}
		}
		for _, nest := range []struct{ obj, key string }{{"meta", "n_ctx"}, {"meta", "n_ctx_train"}, {"top_provider", "context_length"}} {
			if o, ok := e[nest.obj].(map[string]any); ok {
				if n, ok := positiveInt(o[nest.key]); ok {
					return &n, true
				}
			}
		}
		return nil, true
	}
	return nil, false
}

func positiveInt(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f < 1 || f > 1<<40 || f != float64(int64(f)) {
		return 0, false
	}
	return int(f), true
}

type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content          any    `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        any    `json:"reasoning"`
			ToolCalls        []any  `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		CompletionTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

func (r *run) chatBody(messages []any, extra map[string]any) map[string]any {
	n := probeMaxTokens
	if r.m.MaxTokens > 0 && r.m.MaxTokens < n {
		n = r.m.MaxTokens
	}
	b := map[string]any{"model": r.m.Model, "messages": messages, r.maxParam: n, "stream": false}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func userText(s string) []any { return []any{map[string]any{"role": "user", "content": s}} }

// chat sends the basic chat probe. ok is false when the upstream answered but not with a
// completion; err is returned for failures that make the whole probe meaningless.
func (r *run) chat(caps *Capabilities) (ok, reasoning bool, err error) {
	body := r.chatBody(userText("Reply with the single word: ok"), nil)
	a, terr := r.do(r.ctx, http.MethodPost, "/chat/completions", body)
	if terr == nil && a.status == http.StatusBadRequest && bytes.Contains(a.body, []byte("max_tokens")) {
		// Some providers refuse max_tokens for newer models and want max_completion_tokens.
		r.maxParam = "max_completion_tokens"
		a, terr = r.do(r.ctx, http.MethodPost, "/chat/completions", r.chatBody(userText("Reply with the single word: ok"), nil))
	}
	if terr != nil {
		if r.timedOut {
			return false, false, ErrUpstreamTimeout.Msg("upstream %s did not answer a chat request within %s", r.m.BaseURL, r.p.timeout)
		}
		return false, false, ErrUpstreamUnreachable.Msg("upstream %s could not be reached", r.m.BaseURL)
	}
	switch {
	case a.status == http.StatusUnauthorized || a.status == http.StatusForbidden:
		return false, false, ErrUpstreamError.Msg("upstream refused the credential (HTTP %d); check credentialRef %s", a.status, orNone(r.m.CredentialRef)).
			WithDetails(map[string]any{"status": a.status})
	case a.status == http.StatusNotFound:
		note := "the upstream has no chat endpoint for this model"
		if !strings.HasSuffix(r.m.BaseURL, "/v1") {
			note += "; baseUrl usually ends with /v1"
		}
		caps.Probes = append(caps.Probes, Probe{Name: "chat", Status: a.status, Result: ResultUnsupported, Note: note})
		return false, false, nil
	case !ok2xx(a.status):
		caps.Probes = append(caps.Probes, Probe{Name: "chat", Status: a.status, Result: ResultUnsupported, Note: "the upstream refused a minimal chat request"})
		return false, false, nil
	}
	var c chatAnswer
	if json.Unmarshal(a.body, &c) != nil || len(c.Choices) == 0 {
		caps.Probes = append(caps.Probes, Probe{Name: "chat", Status: a.status, Result: ResultUnknown, Note: "the answer is not a chat completion"})
		return false, false, nil
	}
	msg := c.Choices[0].Message
	reasoning = msg.ReasoningContent != "" || nonEmpty(msg.Reasoning) || c.Usage.CompletionTokensDetails.ReasoningTokens > 0
	note := "no reasoning_content, reasoning or reasoning_tokens in the answer"
	if reasoning {
		note = "the answer carried reasoning"
	}
	caps.Probes = append(caps.Probes, Probe{Name: "chat", Status: a.status, Result: ResultSupported, Note: note})
	return true, reasoning, nil
}

func nonEmpty(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x) != ""
	case nil:
		return false
	case map[string]any:
		return len(x) > 0
	case []any:
		return len(x) > 0
	}
	return true
}

func orNone(s string) string {
	if s == "" {
		return "(none set)"
	}
	return s
}

func (r *run) tools(caps *Capabilities) *bool {
	tool := map[string]any{"type": "function", "function": map[string]any{
		"name": "get_time", "description": "Returns the current time.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{}},
	}}
	body := r.chatBody(userText("What time is it? Call the get_time tool."), map[string]any{"tools": []any{tool}})
	a, err := r.do(r.ctx, http.MethodPost, "/chat/completions", body)
	if err != nil {
		caps.Probes = append(caps.Probes, Probe{Name: "tools", Result: ResultUnknown, Note: "upstream unreachable"})
		return nil
	}
	if a.status == http.StatusBadRequest || a.status == http.StatusUnprocessableEntity {
		caps.Probes = append(caps.Probes, Probe{Name: "tools", Status: a.status, Result: ResultUnsupported, Note: "the upstream refused a request with tools"})
		return ptr(false)
	}
	if !ok2xx(a.status) {
		caps.Probes = append(caps.Probes, Probe{Name: "tools", Status: a.status, Result: ResultUnknown, Note: "the upstream answered an error"})
		return nil
	}
	var c chatAnswer
	note := "the upstream accepted tools; the model answered without calling the tool"
	if json.Unmarshal(a.body, &c) == nil && len(c.Choices) > 0 && len(c.Choices[0].Message.ToolCalls) > 0 {
		note = "the model called the tool"
	}
	caps.Probes = append(caps.Probes, Probe{Name: "tools", Status: a.status, Result: ResultSupported, Note: note})
	return ptr(true)
}

func (r *run) vision(caps *Capabilities) *bool {
	msg := []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "What colour is this image? Answer with one word."},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + redSquarePNG()}},
	}}}
	a, err := r.do(r.ctx, http.MethodPost, "/chat/completions", r.chatBody(msg, nil))
	if err != nil {
		caps.Probes = append(caps.Probes, Probe{Name: "vision", Result: ResultUnknown, Note: "upstream unreachable"})
		return nil
	}
	if !ok2xx(a.status) {
		// Text-only servers refuse image parts with a 4xx (OpenAI-style) or a 500 (llama.cpp
		// without a projector).
		caps.Probes = append(caps.Probes, Probe{Name: "vision", Status: a.status, Result: ResultUnsupported, Note: "the upstream refused an image_url part"})
		return ptr(false)
	}
	caps.Probes = append(caps.Probes, Probe{Name: "vision", Status: a.status, Result: ResultSupported, Note: "the upstream answered a message with an image_url part"})
	return ptr(true)
}

func (r *run) embeddings(caps *Capabilities) bool {
	a, err := r.do(r.ctx, http.MethodPost, "/embeddings", map[string]any{"model": r.m.Model, "input": "ok"})
	if err != nil {
		caps.Probes = append(caps.Probes, Probe{Name: "embeddings", Result: ResultUnknown, Note: "upstream unreachable"})
		return false
	}
	var e struct {
		Data []struct {
			Embedding any `json:"embedding"`
		} `json:"data"`
	}
	if ok2xx(a.status) && json.Unmarshal(a.body, &e) == nil && len(e.Data) > 0 && e.Data[0].Embedding != nil {
		caps.Probes = append(caps.Probes, Probe{Name: "embeddings", Status: a.status, Result: ResultSupported})
		return true
	}
	caps.Probes = append(caps.Probes, Probe{Name: "embeddings", Status: a.status, Result: ResultUnsupported, Note: "no embedding in the answer"})
	return false
}

func ptr[T any](v T) *T { return &v }

// redSquarePNG is a 16×16 red PNG, small enough for any upstream's image limits.
func redSquarePNG() string {
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for y := 0; y < 16; y++ {
		for x := 0; x < 16; x++ {
			img.Set(x, y, color.RGBA{R: 220, A: 255})
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img) // cannot fail on an in-memory RGBA image
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// Package client holds the HTTP clients the CLI and the control plane use to reach the planes.
// Inference speaks the OpenAI-compatible /v1 surface of the inference plane.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/svc-dev/svc/platform/apperr"
)

// Errors the client reports when the inference plane cannot be reached or answers garbage.
var (
	ErrInferenceUnavailable = apperr.Unavailable("inference_unavailable", "inference plane unreachable")
	ErrInferenceProtocol    = apperr.BadGateway("inference_protocol", "inference plane answered an unreadable response")
	ErrInferenceError       = apperr.BadGateway("inference_error", "inference plane returned an error")
)

// maxErrorBody bounds how much of an error response is read; envelopes are small.
const maxErrorBody = 64 << 10

// maxSSELine bounds one SSE line; a chunk carries a handful of tokens, so 1 MiB is generous.
const maxSSELine = 1 << 20

// ChatMessage is one message of a chat completion request.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatRequest is a streaming chat completion request. Model is a logical id.
// Extra carries further wire parameters (snake_case keys) merged into the request body;
// the typed fields win over Extra.
type ChatRequest struct {
	Model          string         `json:"model"`
	Messages       []ChatMessage  `json:"messages"`
	Temperature    *float64       `json:"temperature,omitempty"`
	TopP           *float64       `json:"top_p,omitempty"`
	MaxTokens      *int           `json:"max_tokens,omitempty"`
	Stop           []string       `json:"stop,omitempty"`
	ResponseFormat map[string]any `json:"response_format,omitempty"`
	Extra          map[string]any `json:"-"`
}

// Delta is one streamed increment: answer text, reasoning text, or both.
type Delta struct {
	Content   string
	Reasoning string
}

// Usage is the token accounting the upstream reports.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ChatResult is the assembled answer of a streamed chat completion.
type ChatResult struct {
	Text         string
	Reasoning    string
	FinishReason string
	Usage        Usage
}

// Inference is a client of the inference plane's /v1 API.
type Inference struct {
	baseURL string
	http    *http.Client
}

// NewInference builds a client; baseURL is the plane's root (e.g. http://127.0.0.1:8081),
// with or without a trailing /v1. A nil httpClient uses one without a global timeout, because
// streams last as long as the model talks; callers bound requests with their context.
func NewInference(baseURL string, httpClient *http.Client) *Inference {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	base := strings.TrimRight(baseURL, "/")
	base = strings.TrimSuffix(base, "/v1")
	return &Inference{baseURL: base, http: httpClient}
}

// body builds the JSON body: Extra first, then the typed fields, with streaming forced on.
func (r ChatRequest) body() ([]byte, error) {
	m := make(map[string]any, len(r.Extra)+8)
	for k, v := range r.Extra {
		m[k] = v
	}
	typed, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var tm map[string]any
	if err := json.Unmarshal(typed, &tm); err != nil {
		return nil, err
	}
	for k, v := range tm {
		m[k] = v
	}
	m["stream"] = true
	m["stream_options"] = map[string]any{"include_usage": true}
	return json.Marshal(m)
}

// chunk is one streamed chat.completion.chunk (or an in-stream error envelope).
type chunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage         `json:"usage"`
	Error *errorEnvelope `json:"error"`
}

// errorEnvelope accepts both the OpenAI shape {message,type,code} and ours {code,message,details}.
type errorEnvelope struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

func (e *errorEnvelope) code() string {
	if len(e.Code) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(e.Code, &s) == nil {
		return s
	}
	return "" // numeric codes (some upstreams) carry no name we can use
}

// ChatStream sends a streaming chat completion and calls onDelta for each increment as it
// arrives (onDelta may be nil). It returns the assembled result when the stream ends with
// [DONE] or a finish reason; an error envelope becomes an *apperr.Error with the same code.
func (c *Inference) ChatStream(ctx context.Context, req ChatRequest, onDelta func(Delta)) (*ChatResult, error) {
	payload, err := req.body()
	if err != nil {
		return nil, apperr.Invalid("chat request is not serialisable").Wrap(err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/v1/chat/completions", bytes.NewReader(payload))
	if err != nil {
		return nil, ErrInferenceUnavailable.Msg("bad inference plane address").Wrap(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrInferenceUnavailable.Wrap(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, errorFromResponse(resp)
	}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/json") {
		return readWhole(resp.Body, onDelta)
	}
	return readStream(ctx, resp.Body, onDelta)
}

// readStream consumes an SSE body of `data: {...}` chunks ending with `data: [DONE]`.
func readStream(ctx context.Context, body io.Reader, onDelta func(Delta)) (*ChatResult, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	var text, reasoning strings.Builder
	res := &ChatResult{}
	sawChunk := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data:") {
			continue // event names, comments (": keepalive"), blank separators
		}
		data := strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		if data == "[DONE]" {
			res.Text, res.Reasoning = text.String(), reasoning.String()
			return res, nil
		}
		var ch chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return nil, ErrInferenceProtocol.Msg("unreadable stream chunk").Wrap(err)
		}
		if ch.Error != nil {
			return nil, envelopeError(http.StatusBadGateway, ch.Error)
		}
		sawChunk = true
		if ch.Usage != nil {
			res.Usage = *ch.Usage
		}
		for _, choice := range ch.Choices {
			d := Delta{Content: choice.Delta.Content, Reasoning: choice.Delta.ReasoningContent}
			if d.Reasoning == "" {
				d.Reasoning = choice.Delta.Reasoning
			}
			text.WriteString(d.Content)
			reasoning.WriteString(d.Reasoning)
			if onDelta != nil && (d.Content != "" || d.Reasoning != "") {
				onDelta(d)
			}
			if choice.FinishReason != nil && *choice.FinishReason != "" {
				res.FinishReason = *choice.FinishReason
			}
		}
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrInferenceUnavailable.Msg("stream broken").Wrap(err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Some servers close without [DONE]; a finish reason is enough to call the answer whole.
	if sawChunk && res.FinishReason != "" {
		res.Text, res.Reasoning = text.String(), reasoning.String()
		return res, nil
	}
	return nil, ErrInferenceProtocol.Msg("stream ended before the answer finished")
}

// readWhole accepts a non-streamed chat.completion (servers that ignore stream=true).
func readWhole(body io.Reader, onDelta func(Delta)) (*ChatResult, error) {
	var full struct {
		Choices []struct {
			Message struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
				Reasoning        string `json:"reasoning"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage Usage `json:"usage"`
	}
	if err := json.NewDecoder(io.LimitReader(body, 64<<20)).Decode(&full); err != nil {
		return nil, ErrInferenceProtocol.Wrap(err)
	}
	if len(full.Choices) == 0 {
		return nil, ErrInferenceProtocol.Msg("answer without choices")
	}
	ch := full.Choices[0]
	res := &ChatResult{Text: ch.Message.Content, Reasoning: ch.Message.ReasoningContent, FinishReason: ch.FinishReason, Usage: full.Usage}
	if res.Reasoning == "" {
		res.Reasoning = ch.Message.Reasoning
	}
	if onDelta != nil && (res.Text != "" || res.Reasoning != "") {
		onDelta(Delta{Content: res.Text, Reasoning: res.Reasoning})
	}
	return res, nil
}

// errorFromResponse maps a non-2xx answer to an *apperr.Error carrying the plane's code.
func errorFromResponse(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var env struct {
		Error *errorEnvelope `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Error != nil {
		return envelopeError(resp.StatusCode, env.Error)
	}
	return ErrInferenceError.Msg("inference plane answered %d", resp.StatusCode).WithDetails(map[string]any{"status": resp.StatusCode})
}

// envelopeError keeps the upstream code and status so callers see model_not_found as 404 etc.
func envelopeError(status int, e *errorEnvelope) error {
	code := e.code()
	if code == "" {
		code = e.Type
	}
	msg := e.Message
	if msg == "" {
		msg = "inference plane returned an error"
	}
	if code == "" {
		return ErrInferenceError.Msg("%s", msg).WithDetails(map[string]any{"status": status})
	}
	if status < 400 || status > 599 {
		status = http.StatusBadGateway
	}
	return apperr.New(status, code, msg)
}

// IsCode reports whether err is an *apperr.Error with the given code.
func IsCode(err error, code string) bool {
	var ae *apperr.Error
	return errors.As(err, &ae) && ae.Code == code
}

// String makes requests readable in test failures without dumping message contents.
func (r ChatRequest) String() string {
	return fmt.Sprintf("ChatRequest{model=%s messages=%d}", r.Model, len(r.Messages))
}

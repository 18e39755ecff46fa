package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc-dev/svc/platform/apperr"
)

// sseUpstream answers /v1/chat/completions with the given SSE frames and records the request body.
func sseUpstream(t *testing.T, frames []string, got *map[string]any) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if got != nil {
			raw, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(raw, got)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, f := range frames {
			fmt.Fprintf(w, "data: %s\n\n", f)
			fl.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestChatStreamAssemblesDeltas(t *testing.T) {
	var body map[string]any
	srv := sseUpstream(t, []string{
		`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"think"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning":"ing"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}`,
		`{"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`,
		`[DONE]`,
	}, &body)
	c := NewInference(srv.URL+"/v1/", nil)
	temp := 0.2
	maxTok := 64
	var deltas []Delta
	res, err := c.ChatStream(context.Background(), ChatRequest{
		Model:          "chat",
		Messages:       []ChatMessage{{Role: "user", Content: "hi"}},
		Temperature:    &temp,
		MaxTokens:      &maxTok,
		ResponseFormat: map[string]any{"type": "json_object"},
		Extra:          map[string]any{"seed": 3, "max_tokens": 1},
	}, func(d Delta) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Hello" || res.Reasoning != "thinking" || res.FinishReason != "stop" {
		t.Fatalf("result %+v", res)
	}
	if res.Usage.PromptTokens != 7 || res.Usage.CompletionTokens != 2 {
		t.Fatalf("usage %+v", res.Usage)
	}
	want := []Delta{{Reasoning: "think"}, {Reasoning: "ing"}, {Content: "Hel"}, {Content: "lo"}}
	if fmt.Sprint(deltas) != fmt.Sprint(want) {
		t.Fatalf("deltas %v, want %v", deltas, want)
	}
	if body["model"] != "chat" || body["stream"] != true || body["max_tokens"] != float64(64) || body["seed"] != float64(3) {
		t.Fatalf("request body %v", body)
	}
	if rf, _ := body["response_format"].(map[string]any); rf["type"] != "json_object" {
		t.Fatalf("response_format %v", body["response_format"])
	}
}

func TestChatStreamErrorEnvelopes(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		code   string
		want   int
	}{
		{"model not found", 404, `{"error":{"message":"model \"x\" is not registered","type":"invalid_request_error","code":"model_not_found"}}`, "model_not_found", 404},
		{"engine unavailable", 503, `{"error":{"message":"engine not installed","type":"server_error","code":"engine_unavailable"}}`, "engine_unavailable", 503},
		{"no capacity", 503, `{"error":{"message":"all slots busy","type":"server_error","code":"no_capacity"}}`, "no_capacity", 503},
		{"credential", 502, `{"error":{"message":"credentialRef unresolved","type":"server_error","code":"credential_error"}}`, "credential_error", 502},
		{"our envelope", 404, `{"error":{"code":"model_not_found","message":"nope","details":{}}}`, "model_not_found", 404},
		{"not json", 500, `boom`, "inference_error", 502},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			_, err := NewInference(srv.URL, srv.Client()).ChatStream(context.Background(), ChatRequest{Model: "x"}, nil)
			ae := apperr.From(err)
			if ae == nil || ae.Code != tc.code || ae.Status != tc.want {
				t.Fatalf("err %v, want %s/%d", err, tc.code, tc.want)
			}
		})
	}
}

func TestChatStreamInStreamError(t *testing.T) {
	srv := sseUpstream(t, []string{
		`{"choices":[{"index":0,"delta":{"content":"a"}}]}`,
		`{"error":{"message":"engine crashed","type":"server_error","code":"engine_unavailable"}}`,
	}, nil)
	_, err := NewInference(srv.URL, nil).ChatStream(context.Background(), ChatRequest{Model: "x"}, nil)
	if !IsCode(err, "engine_unavailable") {
		t.Fatalf("err %v", err)
	}
}

func TestChatStreamTruncated(t *testing.T) {
	srv := sseUpstream(t, []string{`{"choices":[{"index":0,"delta":{"content":"a"}}]}`}, nil)
	_, err := NewInference(srv.URL, nil).ChatStream(context.Background(), ChatRequest{Model: "x"}, nil)
	if !IsCode(err, "inference_protocol") {
		t.Fatalf("err %v", err)
	}
}

func TestChatStreamUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := NewInference(url, nil).ChatStream(context.Background(), ChatRequest{Model: "x"}, nil)
	if !errors.Is(err, ErrInferenceUnavailable) {
		t.Fatalf("err %v", err)
	}
}

func TestChatStreamCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := NewInference(srv.URL, nil).ChatStream(ctx, ChatRequest{Model: "x"}, func(Delta) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

func TestChatStreamNonStreamedAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"whole"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()
	res, err := NewInference(srv.URL, nil).ChatStream(context.Background(), ChatRequest{Model: "x"}, nil)
	if err != nil || res.Text != "whole" || res.FinishReason != "length" {
		t.Fatalf("res %+v err %v", res, err)
	}
}

// FuzzReadStream feeds arbitrary upstream bodies to the SSE reader: it must never panic.
func FuzzReadStream(f *testing.F) {
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n")
	f.Add("data: {\"error\":{\"code\":5}}\n")
	f.Add(": keepalive\n\ndata: [DONE]\n")
	f.Add("data: {\"choices\":null}\n")
	f.Fuzz(func(t *testing.T, body string) {
		res, err := readStream(context.Background(), strings.NewReader(body), func(Delta) {})
		if err == nil && res == nil {
			t.Fatal("nil result without error")
		}
	})
}

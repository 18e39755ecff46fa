package engines_test

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/engines"
	"github.com/svc-dev/svc/modules/models"
)

// benchChat is one chat completion on a lease, without test assertions in the loop.
func benchChat(b *testing.B, l *engines.Lease) {
	resp, err := http.Post(l.BaseURL+"/chat/completions", "application/json", strings.NewReader(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("chat = %d", resp.StatusCode)
	}
}

// BenchmarkEngineColdStart: evicted engine → start the stand-in, wait for /health, one chat.
func BenchmarkEngineColdStart(b *testing.B) {
	svc := newSupervisor(b, 1)
	m := llamaModel(b, "bench")
	ctx := context.Background()
	for b.Loop() {
		if _, err := svc.Evict(ctx, m); err != nil {
			b.Fatal(err)
		}
		l, err := svc.Acquire(ctx, m)
		if err != nil {
			b.Fatal(err)
		}
		benchChat(b, l)
		l.Release()
	}
}

// BenchmarkEngineWarmRequest: resident engine → lease, one chat, release.
func BenchmarkEngineWarmRequest(b *testing.B) {
	svc := newSupervisor(b, 1)
	m := llamaModel(b, "bench")
	ctx := context.Background()
	if _, err := svc.Warm(ctx, m); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		l, err := svc.Acquire(ctx, m)
		if err != nil {
			b.Fatal(err)
		}
		benchChat(b, l)
		l.Release()
	}
}

// BenchmarkEspeakSentence: one English sentence synthesised by the real espeak-ng.
func BenchmarkEspeakSentence(b *testing.B) {
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		b.Skip("espeak-ng not installed")
	}
	svc := engines.New(engines.Options{})
	defer svc.Close()
	m := &models.Model{ID: "tts", Binding: models.BindingEspeakNg, Voice: "en", Revision: 1}
	l, err := svc.Acquire(context.Background(), m)
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: l.Transport}
	var size int
	for b.Loop() {
		resp, err := client.Post(l.BaseURL+"/audio/speech", "application/json", strings.NewReader(`{"model":"tts","input":"The quick brown fox jumps over the lazy dog, and then it runs back home.","voice":"alloy"}`))
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("speech = %d %s", resp.StatusCode, body)
		}
		size = len(body)
	}
	b.ReportMetric(float64(size), "wav-bytes")
}

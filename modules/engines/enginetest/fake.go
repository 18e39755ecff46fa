// Package enginetest holds a stand-in llama-server for tests. llama.cpp, whisper.cpp and
// stable-diffusion.cpp do not install from Debian's packages here, so the supervision logic
// is tested against a test binary that re-executes itself as this server: it parses
// llama-server's flags, serves /health and an OpenAI-style /v1/chat/completions, and
// takes extra flags (passed as the model's args) to misbehave.
package enginetest

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Env marks a process started as the stand-in (children inherit it).
const Env = "SVC_ENGINES_FAKE_SERVER"

// Main is a TestMain: in a child started by the supervisor it runs the stand-in; in the
// test process it sets Env for the children and runs the tests.
func Main(m *testing.M) {
	// Test processes the test binary starts itself (fuzz workers) carry -test. flags.
	if os.Getenv(Env) == "1" && !(len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "-test.")) {
		if filepath.Base(os.Args[0]) == "sd" {
			os.Exit(FakeSD(os.Args[1:]))
		}
		os.Exit(FakeServer(os.Args[1:]))
	}
	os.Setenv(Env, "1")
	os.Exit(m.Run())
}

// FakeServer runs the stand-in with llama-server's arguments and returns its exit code.
func FakeServer(args []string) int {
	fs := flag.NewFlagSet("llama-server", flag.ContinueOnError)
	model := fs.String("m", "", "model path")
	host := fs.String("host", "127.0.0.1", "")
	port := fs.Int("port", 0, "")
	ctx := fs.Int("ctx-size", 0, "")
	fs.Bool("embeddings", false, "serve /v1/embeddings")
	slow := fs.Duration("fake-slow-start", 0, "answer 503 on /health this long")
	exitAtStart := fs.Bool("fake-exit-at-start", false, "exit 2 at once")
	neverHealthy := fs.Bool("fake-never-healthy", false, "answer 503 on /health forever")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *exitAtStart {
		fmt.Fprintln(os.Stderr, "error: failed to load model: fake")
		return 2
	}
	if _, err := os.Stat(*model); err != nil {
		fmt.Fprintln(os.Stderr, "error: model file:", err)
		return 1
	}
	started := time.Now()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if *neverHealthy || time.Since(started) < *slow {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"message":"Loading model"}}`)
			return
		}
		fmt.Fprint(w, `{"status":"ok"}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		last := ""
		if n := len(req.Messages); n > 0 {
			last = req.Messages[n-1].Content
		}
		if last == "crash" {
			fmt.Fprintln(os.Stderr, "GGML_ASSERT: fake crash")
			os.Exit(3)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": fmt.Sprintf("pid %d ctx %d: %s", os.Getpid(), *ctx, last)}}},
		})
	})
	srv := &http.Server{Addr: fmt.Sprintf("%s:%d", *host, *port), Handler: mux}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// PNG is the image the stand-in sd writes: a PNG signature and the prompt.
func PNG(prompt string) []byte { return append([]byte("\x89PNG\r\n\x1a\n"), prompt...) }

// FakeSD is a stand-in for stable-diffusion.cpp's sd: it parses -m, -p, -o and -b and
// writes one PNG per image (out.png, out_2.png, …). A prompt of "fail" exits 1.
func FakeSD(args []string) int {
	fs := flag.NewFlagSet("sd", flag.ContinueOnError)
	model := fs.String("m", "", "")
	prompt := fs.String("p", "", "")
	out := fs.String("o", "output.png", "")
	batch := fs.Int("b", 1, "")
	fs.Int("W", 512, "")
	fs.Int("H", 512, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if _, err := os.Stat(*model); err != nil || *prompt == "fail" {
		fmt.Fprintln(os.Stderr, "[ERROR] new_sd_ctx_t failed")
		return 1
	}
	for i := 1; i <= *batch; i++ {
		p := *out
		if i > 1 {
			p = strings.TrimSuffix(*out, ".png") + fmt.Sprintf("_%d.png", i)
		}
		if err := os.WriteFile(p, PNG(*prompt), 0o600); err != nil {
			return 1
		}
	}
	return 0
}

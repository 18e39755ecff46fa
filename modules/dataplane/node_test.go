package dataplane_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
)

// TestOpenAINodeClient runs test/openai-client (the official openai npm package under
// node --test) against the plane in front of scripted upstreams, then checks what the
// upstreams received. CI installs the package with: npm ci --prefix test/openai-client
func TestOpenAINodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the real-client test needs Node 20+")
	}
	dir, err := filepath.Abs("../../test/openai-client")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		t.Skip("test/openai-client/node_modules is missing: run npm ci --prefix test/openai-client")
	}

	b := setup(t, dataplanetest.Script{})
	empty := dataplanetest.New(dataplanetest.Script{SpeechEmpty: true})
	t.Cleanup(empty.Close)
	urls := dataplanetest.New(dataplanetest.Script{ImagesAsURL: true})
	t.Cleanup(urls.Close)
	b.models.Put(dataplane.Target{LogicalID: "speech-empty", BaseURL: empty.BaseURL(), Model: "tts-1"})
	b.models.Put(dataplane.Target{LogicalID: "img-url", BaseURL: urls.BaseURL(), Model: "sd-url"})
	b.models.Put(dataplane.Target{LogicalID: "no-v1", BaseURL: b.up.URL, Model: "sd"})
	b.models.Put(dataplane.Target{LogicalID: "down", BaseURL: closedURL(t), Model: "m"})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "client.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SVC_BASE_URL="+b.srv.URL+"/v1", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test failed: %v\n%s", err, out)
	}
	t.Logf("node --test:\n%s", lastLines(out, 12))

	// What the client sent reached the upstream rewritten, with our credential.
	var sawChat, sawFile bool
	for _, r := range b.up.Requests() {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			t.Errorf("%s: Authorization %q, want the credential", r.Path, r.Header.Get("Authorization"))
		}
		switch r.Path {
		case "/v1/chat/completions":
			if r.JSON["model"] != "provider-chat-1" {
				t.Errorf("chat model %v", r.JSON["model"])
			}
			if mt, ok := r.JSON["max_tokens"].(float64); !ok || mt > 100 {
				t.Errorf("max_tokens %v, want capped to 100", r.JSON["max_tokens"])
			}
			sawChat = true
		case "/v1/audio/transcriptions":
			if r.Fields["model"] != "provider-chat-1" || !bytes.Equal(r.Files["file"], bytes.Repeat([]byte{7}, 3000)) || r.Fields["language"] != "en" {
				t.Errorf("transcription form: model %q, %d file bytes, fields %v", r.Fields["model"], len(r.Files["file"]), r.Fields)
			}
			sawFile = true
		}
	}
	if !sawChat || !sawFile {
		t.Errorf("the upstream saw chat %v, transcription %v", sawChat, sawFile)
	}
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}

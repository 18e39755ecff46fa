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

// FuzzRunnerRequests feeds arbitrary bodies to the per-request runners (speech, images),
// with `true` standing in for the program: every body is answered with a status, never a
// panic or a transport error, and malformed ones are 4xx.
func FuzzRunnerRequests(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hello","voice":"alloy"}`,
		`{"input":"-h","voice":"-w"}`,
		`{"input":"x","voice":{"id":"v"}}`,
		`{"input":"x","response_format":"mp3"}`,
		`{"prompt":"a fox","n":2,"size":"512x512"}`,
		`{"prompt":"x","size":"0x-64"}`,
		`{"prompt":"x","n":99}`,
		`[]`, `null`, `{"input":null}`, "\xff",
	} {
		f.Add(s)
	}
	bin, err := exec.LookPath("true")
	if err != nil {
		f.Skip("no true(1)")
	}
	svc := engines.New(engines.Options{LookPath: func(string) (string, error) { return bin, nil }})
	f.Cleanup(func() { _ = svc.Close() })
	img := &models.Model{ID: "img", Binding: models.BindingStableDiffusionCpp, ModelPath: bin, Revision: 1}
	tts := &models.Model{ID: "tts", Binding: models.BindingEspeakNg, Voice: "en", Revision: 1}
	f.Fuzz(func(t *testing.T, body string) {
		for _, c := range []struct {
			m    *models.Model
			path string
		}{{tts, "/audio/speech"}, {img, "/images/generations"}} {
			l, err := svc.Acquire(context.Background(), c.m)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: l.Transport}).Post(l.BaseURL+c.path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatalf("transport error: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// `true` prints nothing: no request can succeed, and a failure is the engine's (500).
			if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("%s %q: status %d", c.path, body, resp.StatusCode)
			}
		}
	})
}

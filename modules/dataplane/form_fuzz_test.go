package dataplane_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"testing"

	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
)

// FuzzTranscriptionForm sends arbitrary multipart bodies through the real stack: a client's
// form may be refused (4xx) but never produce a 5xx against a healthy upstream, and
// whatever reaches the upstream carries the provider-side model name.
func FuzzTranscriptionForm(f *testing.F) {
	const boundary = "fuzzboundary"
	seed := func(parts ...[3]string) []byte { // name, filename, value
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		_ = w.SetBoundary(boundary)
		for _, p := range parts {
			if p[1] != "" {
				fw, _ := w.CreateFormFile(p[0], p[1])
				io.WriteString(fw, p[2])
			} else {
				w.WriteField(p[0], p[2])
			}
		}
		w.Close()
		return b.Bytes()
	}
	f.Add(seed([3]string{"model", "", "chat"}, [3]string{"file", "a.wav", "RIFF"}))
	f.Add(seed([3]string{"file", "a.wav", "RIFF"}, [3]string{"model", "", "chat"}, [3]string{"language", "", "en"}))
	f.Add(seed([3]string{"model", "", "chat"}, [3]string{"file", "a.wav", "x"}, [3]string{"model", "", "open"}))
	f.Add(seed([3]string{"model", "", "open"}, [3]string{"file", "", "not a file"}))
	f.Add([]byte("--" + boundary + "\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nchat\r\n--" + boundary))
	f.Add([]byte{})

	b := setup(f, dataplanetest.Script{})
	f.Fuzz(func(t *testing.T, body []byte) {
		b.up.Reset()
		resp, err := http.Post(b.srv.URL+"/v1/audio/transcriptions", "multipart/form-data; boundary="+boundary, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%d %s for body %q", resp.StatusCode, out, body)
		}
		for _, r := range b.up.Requests() {
			if m := r.Fields["model"]; m != "provider-chat-1" && m != "provider-open" {
				t.Fatalf("upstream got model %q for body %q", m, body)
			}
		}
	})
}

package dataplane_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"testing"

	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
)

type field struct{ name, value string }

// form builds a multipart body; file (if any) is inserted at position fileAt among fields.
func form(t *testing.T, fields []field, fileAt int, file []byte) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	writeFile := func() {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="speech.wav"`)
		h.Set("Content-Type", "audio/wav")
		p, _ := w.CreatePart(h)
		p.Write(file)
	}
	for i, f := range fields {
		if i == fileAt && file != nil {
			writeFile()
		}
		w.WriteField(f.name, f.value)
	}
	if fileAt >= len(fields) && file != nil {
		writeFile()
	}
	w.Close()
	return w.FormDataContentType(), b.Bytes()
}

func postForm(t *testing.T, url, ct string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url+"/v1/audio/transcriptions", ct, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func TestTranscriptions(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	// Larger than the plane's 4 MiB JSON body limit: the upload route has its own.
	audio := make([]byte, 5<<20+123)
	rand.Read(audio)
	fields := []field{{"model", "chat"}, {"language", "fr"}, {"response_format", "json"}, {"prompt", "Bonjour <b>"}}
	for _, tc := range []struct {
		name   string
		fileAt int
	}{
		{"model before file (streamed)", 4},
		{"file first (spooled)", 0},
		{"file in the middle", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, body := form(t, fields, tc.fileAt, audio)
			status, out := postForm(t, b.srv.URL, ct, body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, out)
			}
			var res struct{ Text string }
			if err := json.Unmarshal(out, &res); err != nil || res.Text != "heard 5243003 bytes" {
				t.Errorf("answer %s", out)
			}
			got := b.up.Last()
			if got.Fields["model"] != "provider-chat-1" {
				t.Errorf("upstream model = %q", got.Fields["model"])
			}
			if got.Fields["language"] != "fr" || got.Fields["prompt"] != "Bonjour <b>" || got.Fields["response_format"] != "json" {
				t.Errorf("fields not passed through: %v", got.Fields)
			}
			if !bytes.Equal(got.Files["file"], audio) {
				t.Errorf("file bytes differ (%d received, %d sent)", len(got.Files["file"]), len(audio))
			}
			if got.FileNames["file"] != "speech.wav" || got.FileTypes["file"] != "audio/wav" {
				t.Errorf("file part header: name %q type %q", got.FileNames["file"], got.FileTypes["file"])
			}
			if got.Header.Get("Authorization") != "Bearer "+secret {
				t.Errorf("bearer = %q", got.Header.Get("Authorization"))
			}
			want := []string{"model", "language", "response_format", "prompt"}
			want = append(want[:tc.fileAt], append([]string{"file"}, want[tc.fileAt:]...)...)
			if len(got.FieldOrder) != len(want) {
				t.Fatalf("field order %v, want %v", got.FieldOrder, want)
			}
			for i := range want {
				if got.FieldOrder[i] != want[i] {
					t.Errorf("field order %v, want %v", got.FieldOrder, want)
					break
				}
			}
		})
	}

	t.Run("text response passes through", func(t *testing.T) {
		ct, body := form(t, []field{{"model", "chat"}, {"response_format", "text"}}, 2, []byte("RIFF...."))
		status, out := postForm(t, b.srv.URL, ct, body)
		if status != 200 || string(out) != "heard 8 bytes\n" {
			t.Errorf("= %d %q", status, out)
		}
	})
}

func TestTranscriptionErrors(t *testing.T) {
	b := setup(t, dataplanetest.Script{}, func(o *dataplane.Options) { o.UploadLimit = 1 << 20 })
	small := []byte("RIFF0000WAVE")
	cases := []struct {
		name   string
		ct     string
		body   []byte
		status int
		code   string
	}{
		{"no model", "", nil, 400, "invalid_request"},
		{"no file", "", nil, 400, "invalid_request"},
		{"unknown model", "", nil, 404, "model_not_found"},
		{"two model fields", "", nil, 400, "invalid_request"},
		{"not multipart", "application/json", []byte(`{"model":"chat"}`), 400, "invalid_request"},
		{"truncated form", "", nil, 400, "invalid_request"},
		{"over the upload limit", "", nil, 413, "payload_too_large"},
	}
	for i := range cases {
		tc := &cases[i]
		switch tc.name {
		case "no model":
			tc.ct, tc.body = form(t, []field{{"language", "en"}}, 1, small)
		case "no file":
			tc.ct, tc.body = form(t, []field{{"model", "chat"}}, 1, nil)
		case "unknown model":
			tc.ct, tc.body = form(t, []field{{"model", "whisper.cpp"}}, 1, small)
		case "two model fields":
			tc.ct, tc.body = form(t, []field{{"model", "chat"}, {"model", "open"}}, 2, small)
		case "truncated form":
			ct, body := form(t, []field{{"language", "en"}}, 0, small)
			tc.ct, tc.body = ct, body[:len(body)/2]
		case "over the upload limit":
			tc.ct, tc.body = form(t, []field{{"model", "chat"}}, 1, make([]byte, 2<<20))
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b.up.Reset()
			status, out := postForm(t, b.srv.URL, tc.ct, tc.body)
			var env struct {
				Error struct{ Code, Message, Type string } `json:"error"`
			}
			_ = json.Unmarshal(out, &env)
			if status != tc.status || env.Error.Code != tc.code {
				t.Errorf("= %d %s, want %d %s", status, out, tc.status, tc.code)
			}
			if tc.status != 413 && len(b.up.Requests()) != 0 {
				t.Errorf("the upstream was called for a bad form")
			}
		})
	}
}

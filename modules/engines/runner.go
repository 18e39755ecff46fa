package engines

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/modules/models"
)

// Per-request engines (espeak-ng, stable-diffusion.cpp's sd) have no server mode worth
// supervising: each request runs the program once. They are reached through an
// http.RoundTripper so that the data plane treats them like any upstream (same error
// mapping, same response handling) without a listening port.

// Limits of per-request engines.
const (
	// MaxSpeechInput is OpenAI's limit on the speech input, in characters.
	MaxSpeechInput = 4096
	maxRunnerBody  = 1 << 20
	maxAudio       = 64 << 20
	maxPrompt      = 8192
	maxImages      = 4
)

// openAIVoice reports the voice names OpenAI clients send; they map to the registered voice.
func openAIVoice(v string) bool {
	switch v {
	case "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse":
		return true
	}
	return false
}

type runner struct {
	svc   *Service
	def   *Def
	bin   string
	model models.Model
}

func (s *Service) runner(d *Def, bin string, m *models.Model) http.RoundTripper {
	return &runner{svc: s, def: d, bin: bin, model: *m}
}

// RoundTrip serves one data-plane request by running the engine program.
func (r *runner) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	var path string
	switch r.model.Binding {
	case models.BindingEspeakNg:
		path = "/v1/audio/speech"
	case models.BindingStableDiffusionCpp:
		path = "/v1/images/generations"
	}
	if req.Method != http.MethodPost || req.URL.Path != path {
		return jsonError(req, http.StatusNotFound, fmt.Sprintf("%s serves POST %s only", r.def.Name, path)), nil
	}
	raw, err := io.ReadAll(io.LimitReader(req.Body, maxRunnerBody+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxRunnerBody {
		return jsonError(req, http.StatusRequestEntityTooLarge, "request body is larger than 1 MiB"), nil
	}
	ctx, cancel := context.WithTimeout(req.Context(), r.svc.runTimeout)
	defer cancel()
	if r.model.Binding == models.BindingEspeakNg {
		return r.speech(ctx, req, raw)
	}
	return r.images(ctx, req, raw)
}

// speech runs espeak-ng --stdout -v VOICE with the input on stdin: never in argv, where an
// input starting with "-" would be read as an option.
func (r *runner) speech(ctx context.Context, req *http.Request, raw []byte) (*http.Response, error) {
	var body struct {
		Input          *string `json:"input"`
		Voice          any     `json:"voice"`
		ResponseFormat string  `json:"response_format"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return jsonError(req, http.StatusBadRequest, "the body is not a speech request: "+err.Error()), nil
	}
	if body.Input == nil || strings.TrimSpace(*body.Input) == "" {
		return jsonError(req, http.StatusBadRequest, "input (the text to speak) is required"), nil
	}
	if n := utf8.RuneCountInString(*body.Input); n > MaxSpeechInput {
		return jsonError(req, http.StatusBadRequest, fmt.Sprintf("input is %d characters; at most %d", n, MaxSpeechInput)), nil
	}
	if f := body.ResponseFormat; f != "" && f != "wav" {
		return jsonError(req, http.StatusBadRequest, fmt.Sprintf("espeak-ng produces wav audio only; response_format %q is not available (send wav or leave it out)", clipReason(f))), nil
	}
	voice := r.model.Voice
	if voice == "" {
		voice = "en"
	}
	switch v := body.Voice.(type) {
	case nil:
	case string:
		if v != "" && !openAIVoice(v) {
			if !models.ValidVoice(v) {
				return jsonError(req, http.StatusBadRequest, "voice must be an espeak-ng voice name such as en, en-us or en+f3, or an OpenAI voice name (mapped to the model's voice)"), nil
			}
			voice = v
		}
	default:
		// Newer OpenAI clients may send {"id": "..."} for custom voices: use the model's voice.
	}
	cmd := exec.CommandContext(ctx, r.bin, "--stdout", "-v", voice)
	cmd.Stdin = strings.NewReader(*body.Input)
	var out bytes.Buffer
	errTail := &tailBuffer{max: 1024}
	cmd.Stdout = &limitedWriter{w: &out, n: maxAudio}
	cmd.Stderr = errTail
	setGroup(cmd)
	err := cmd.Run()
	if err != nil {
		msg := "espeak-ng failed (" + err.Error() + ")"
		if t := errTail.String(); t != "" {
			msg += ": " + t
		}
		return jsonError(req, http.StatusInternalServerError, msg), nil
	}
	if out.Len() == 0 {
		return jsonError(req, http.StatusInternalServerError, "espeak-ng produced no audio"), nil
	}
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"audio/wav"}},
		Body:          io.NopCloser(bytes.NewReader(out.Bytes())),
		ContentLength: int64(out.Len()),
		Request:       req,
	}, nil
}

// images runs sd -m MODEL -p PROMPT -o FILE [-W W -H H] [-b N] and answers the PNGs as
// b64_json. The prompt is an argument value (sd has no stdin prompt); it follows -p, so
// a prompt starting with "-" is still read as the value.
func (r *runner) images(ctx context.Context, req *http.Request, raw []byte) (*http.Response, error) {
	var body struct {
		Prompt *string `json:"prompt"`
		N      *int    `json:"n"`
		Size   string  `json:"size"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return jsonError(req, http.StatusBadRequest, "the body is not an image request: "+err.Error()), nil
	}
	if body.Prompt == nil || strings.TrimSpace(*body.Prompt) == "" {
		return jsonError(req, http.StatusBadRequest, "prompt is required"), nil
	}
	if len(*body.Prompt) > maxPrompt || strings.ContainsRune(*body.Prompt, 0) {
		return jsonError(req, http.StatusBadRequest, fmt.Sprintf("prompt must be at most %d bytes without NUL", maxPrompt)), nil
	}
	n := 1
	if body.N != nil {
		if *body.N < 1 || *body.N > maxImages {
			return jsonError(req, http.StatusBadRequest, fmt.Sprintf("n must be from 1 to %d", maxImages)), nil
		}
		n = *body.N
	}
	dir, err := os.MkdirTemp("", "svc-sd-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	outPath := filepath.Join(dir, "out.png")
	args := []string{"-m", r.model.ModelPath, "-p", *body.Prompt, "-o", outPath}
	if body.Size != "" && body.Size != "auto" {
		w, h, ok := parseSize(body.Size)
		if !ok {
			return jsonError(req, http.StatusBadRequest, "size must be WIDTHxHEIGHT (multiples of 64, from 64 to 2048), e.g. 512x512"), nil
		}
		args = append(args, "-W", strconv.Itoa(w), "-H", strconv.Itoa(h))
	}
	if n > 1 {
		args = append(args, "-b", strconv.Itoa(n))
	}
	cmd := exec.CommandContext(ctx, r.bin, args...)
	errTail := &tailBuffer{max: 1024}
	cmd.Stdout, cmd.Stderr = errTail, errTail
	setGroup(cmd)
	if err := cmd.Run(); err != nil {
		return jsonError(req, http.StatusInternalServerError, "sd failed ("+err.Error()+"): "+errTail.String()), nil
	}
	// sd writes out.png for one image and out_2.png, out_3.png … for the rest of a batch.
	var data []map[string]string
	for i := 1; i <= n; i++ {
		p := outPath
		if i > 1 {
			p = filepath.Join(dir, fmt.Sprintf("out_%d.png", i))
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			if i == 1 {
				return jsonError(req, http.StatusInternalServerError, "sd produced no image: "+errTail.String()), nil
			}
			break
		}
		data = append(data, map[string]string{"b64_json": base64.StdEncoding.EncodeToString(b)})
	}
	out, _ := json.Marshal(map[string]any{"created": time.Now().Unix(), "data": data})
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(out)),
		ContentLength: int64(len(out)), Request: req,
	}, nil
}

func parseSize(s string) (int, int, bool) {
	ws, hs, ok := strings.Cut(s, "x")
	if !ok {
		return 0, 0, false
	}
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	valid := func(v int) bool { return v >= 64 && v <= 2048 && v%64 == 0 }
	if err1 != nil || err2 != nil || !valid(w) || !valid(h) {
		return 0, 0, false
	}
	return w, h, true
}

// setGroup runs cmd in its own process group and kills the whole group when its context
// ends, so that nothing the engine spawned outlives the request.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 2 * time.Second
}

// jsonError is an OpenAI-shaped error response from a per-request engine.
func jsonError(req *http.Request, status int, msg string) *http.Response {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "engine_error"}})
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)), Request: req,
	}
}

// limitedWriter fails once more than n bytes were written (the program is then killed by
// its broken pipe or the context).
type limitedWriter struct {
	w io.Writer
	n int64
}

var errTooMuchOutput = errors.New("engine output exceeds the limit")

func (l *limitedWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > l.n {
		return 0, errTooMuchOutput
	}
	l.n -= int64(len(b))
	return l.w.Write(b)
}

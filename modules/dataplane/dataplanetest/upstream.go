// Package dataplanetest is a scripted OpenAI-compatible upstream and static registries, for
// the data plane's tests, its real-client test and its benchmark.
package dataplanetest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Script chooses how the upstream answers. The zero value answers every endpoint well.
type Script struct {
	// ChatGate, when set, holds a streamed chat completion after its first chunk until the
	// channel is closed (or receives), so a test can see that chunk arrive on its own.
	ChatGate chan struct{}
	// Hang, when set, makes every API call wait for the channel to close before answering
	// (upstream timeouts).
	Hang chan struct{}
	// Fail answers the API path (e.g. "/chat/completions") with this status and body.
	Fail map[string]Failure
	// SpeechEmpty answers speech with 200 and no bytes; SpeechAbort cuts the audio short.
	SpeechEmpty, SpeechAbort bool
	// ImagesAsURL answers image generation with URLs served by the upstream itself.
	ImagesAsURL bool
	// ImageFetchBearer requires this bearer on the image URLs (same-origin credentials).
	ImageFetchBearer string
}

// Failure is a scripted error answer.
type Failure struct {
	Status int
	Body   string
}

// Recorded is one request as the upstream received it.
type Recorded struct {
	Path   string
	Header http.Header
	Body   []byte         // raw body (JSON endpoints)
	JSON   map[string]any // decoded JSON body
	// Multipart form (transcriptions): fields in arrival order, values and files.
	FieldOrder []string
	Fields     map[string]string
	Files      map[string][]byte
	FileNames  map[string]string
	FileTypes  map[string]string
}

// Speech is the audio the upstream answers (an MP3 frame header and some bytes).
var Speech = append([]byte{0xFF, 0xFB, 0x90, 0x64}, bytes.Repeat([]byte{0x55}, 4096)...)

// Image is the PNG the upstream generates (signature and IHDR start).
var Image = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

// Upstream is a running scripted server. Its OpenAI base URL is URL + "/v1".
type Upstream struct {
	*httptest.Server
	script Script
	mu     sync.Mutex
	reqs   []Recorded
}

// New starts an upstream; Close it when done.
func New(script Script) *Upstream {
	u := &Upstream{script: script}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", u.api(u.chat))
	mux.HandleFunc("POST /v1/embeddings", u.api(u.embeddings))
	mux.HandleFunc("POST /v1/audio/speech", u.api(u.speech))
	mux.HandleFunc("POST /v1/audio/transcriptions", u.api(u.transcriptions))
	mux.HandleFunc("POST /v1/images/generations", u.api(u.images))
	mux.HandleFunc("GET /files/{name}", u.file)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Unknown request URL: "+r.Method+" "+r.URL.Path, "invalid_request_error", "unknown_url")
	})
	u.Server = httptest.NewServer(mux)
	return u
}

// BaseURL is the OpenAI-style base URL of the upstream.
func (u *Upstream) BaseURL() string { return u.URL + "/v1" }

// Requests returns what the upstream received so far.
func (u *Upstream) Requests() []Recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Recorded(nil), u.reqs...)
}

// Last returns the last request received (zero value if none).
func (u *Upstream) Last() Recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		return Recorded{}
	}
	return u.reqs[len(u.reqs)-1]
}

// Reset forgets the recorded requests.
func (u *Upstream) Reset() {
	u.mu.Lock()
	u.reqs = nil
	u.mu.Unlock()
}

func (u *Upstream) api(h func(w http.ResponseWriter, r *http.Request, rec *Recorded)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := Recorded{Path: r.URL.Path, Header: r.Header.Clone()}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			if err := readForm(r, &rec); err != nil {
				writeError(w, http.StatusBadRequest, "could not parse multipart form: "+err.Error(), "invalid_request_error", nil)
				return
			}
		} else {
			rec.Body, _ = io.ReadAll(r.Body)
			if err := json.Unmarshal(rec.Body, &rec.JSON); err != nil {
				writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_request_error", nil)
				return
			}
		}
		u.mu.Lock()
		u.reqs = append(u.reqs, rec)
		u.mu.Unlock()
		if u.script.Hang != nil {
			select {
			case <-u.script.Hang:
			case <-r.Context().Done():
				return
			}
		}
		if f, ok := u.script.Fail[strings.TrimPrefix(r.URL.Path, "/v1")]; ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.Status)
			io.WriteString(w, f.Body)
			return
		}
		h(w, r, &rec)
	}
}

func readForm(r *http.Request, rec *Recorded) error {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	rec.Fields, rec.Files, rec.FileNames, rec.FileTypes = map[string]string{}, map[string][]byte{}, map[string]string{}, map[string]string{}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return err
		}
		name := p.FormName()
		rec.FieldOrder = append(rec.FieldOrder, name)
		if p.FileName() != "" {
			rec.Files[name], rec.FileNames[name], rec.FileTypes[name] = b, p.FileName(), p.Header.Get("Content-Type")
		} else {
			rec.Fields[name] = string(b)
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg, typ string, code any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

const created = 1700000000

// lastUserText is the text of the last user message (string content or text parts).
func lastUserText(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] != "user" {
			continue
		}
		switch c := m["content"].(type) {
		case string:
			return c
		case []any:
			var b strings.Builder
			for _, p := range c {
				pm, _ := p.(map[string]any)
				if pm["type"] == "text" {
					s, _ := pm["text"].(string)
					b.WriteString(s)
				}
			}
			return b.String()
		}
	}
	return ""
}

func (u *Upstream) chat(w http.ResponseWriter, r *http.Request, rec *Recorded) {
	model, _ := rec.JSON["model"].(string)
	answer := "echo: " + lastUserText(rec.JSON)
	if stream, _ := rec.JSON["stream"].(bool); !stream {
		writeJSON(w, map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": created, "model": model,
			"system_fingerprint": nil,
			"choices":            []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": answer, "refusal": nil}, "logprobs": nil, "finish_reason": "stop"}},
			"usage":              map[string]any{"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		})
		fmt.Fprintf(w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	half := len(answer) / 2
	chunk(map[string]any{"role": "assistant", "content": answer[:half]}, nil)
	if u.script.ChatGate != nil {
		select {
		case <-u.script.ChatGate:
		case <-r.Context().Done():
			return
		}
	}
	chunk(map[string]any{"content": answer[half:]}, nil)
	chunk(map[string]any{}, "stop")
	io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

func (u *Upstream) embeddings(w http.ResponseWriter, r *http.Request, rec *Recorded) {
	model, _ := rec.JSON["model"].(string)
	var inputs []string
	switch in := rec.JSON["input"].(type) {
	case string:
		inputs = []string{in}
	case []any:
		for _, v := range in {
			s, ok := v.(string)
			if !ok {
				writeError(w, http.StatusBadRequest, "input must be a string or a list of strings", "invalid_request_error", nil)
				return
			}
			inputs = append(inputs, s)
		}
	default:
		writeError(w, http.StatusBadRequest, "'input' is a required property", "invalid_request_error", nil)
		return
	}
	b64 := rec.JSON["encoding_format"] == "base64"
	data := make([]any, 0, len(inputs))
	for i, s := range inputs {
		vec := []float32{float32(len(s)), 0.5, -0.25}
		var emb any = vec
		if b64 {
			buf := make([]byte, 4*len(vec))
			for j, f := range vec {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(f))
			}
			emb = base64.StdEncoding.EncodeToString(buf)
		}
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": emb})
	}
	writeJSON(w, map[string]any{"object": "list", "data": data, "model": model, "usage": map[string]any{"prompt_tokens": len(inputs), "total_tokens": len(inputs)}})
}

func (u *Upstream) speech(w http.ResponseWriter, r *http.Request, rec *Recorded) {
	if in, _ := rec.JSON["input"].(string); in == "" {
		writeError(w, http.StatusBadRequest, "input is required", "invalid_request_error", nil)
		return
	}
	w.Header().Set("Content-Type", "audio/mpeg")
	switch {
	case u.script.SpeechEmpty:
		w.WriteHeader(http.StatusOK)
	case u.script.SpeechAbort:
		// Promise more than is sent, then drop the connection.
		w.Header().Set("Content-Length", fmt.Sprint(len(Speech)))
		w.WriteHeader(http.StatusOK)
		w.Write(Speech[:100])
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	default:
		w.Write(Speech)
	}
}

func (u *Upstream) transcriptions(w http.ResponseWriter, r *http.Request, rec *Recorded) {
	if len(rec.Files["file"]) == 0 {
		writeError(w, http.StatusBadRequest, "file is required", "invalid_request_error", nil)
		return
	}
	text := fmt.Sprintf("heard %d bytes", len(rec.Files["file"]))
	if rec.Fields["response_format"] == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, text+"\n")
		return
	}
	writeJSON(w, map[string]any{"text": text, "usage": map[string]any{"type": "duration", "seconds": 1}})
}

func (u *Upstream) images(w http.ResponseWriter, r *http.Request, rec *Recorded) {
	n := 1
	if f, ok := rec.JSON["n"].(float64); ok && f >= 1 {
		n = int(f)
	}
	data := make([]any, 0, n)
	for i := 0; i < n; i++ {
		if u.script.ImagesAsURL {
			data = append(data, map[string]any{"url": fmt.Sprintf("%s/files/img-%d.png", u.URL, i), "revised_prompt": "a revised prompt"})
		} else {
			data = append(data, map[string]any{"b64_json": base64.StdEncoding.EncodeToString(Image)})
		}
	}
	writeJSON(w, map[string]any{"created": created, "data": data})
}

func (u *Upstream) file(w http.ResponseWriter, r *http.Request) {
	if b := u.script.ImageFetchBearer; b != "" && r.Header.Get("Authorization") != "Bearer "+b {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Write(Image)
}

package httpx_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/httpx"
)

// sseServer serves GET /stream with an SSE whose Run result lands in result; setup, when
// set, runs on the stream before Run (for direct writes).
type sseServer struct {
	url    string
	frames chan httpx.Frame
	done   chan struct{}
	result chan error
	sse    chan *httpx.SSE
}

func startSSE(t *testing.T, opts httpx.SSEOptions, configure func(*http.Server)) *sseServer {
	t.Helper()
	s := &sseServer{
		frames: make(chan httpx.Frame),
		done:   make(chan struct{}),
		result: make(chan error, 1),
		sse:    make(chan *httpx.SSE, 1),
	}
	opts.Done = s.done
	e := echo.New()
	e.GET("/stream", func(c echo.Context) error {
		stream, err := httpx.NewSSE(c, opts)
		if err != nil {
			return err
		}
		s.sse <- stream
		err = stream.Run(c.Request().Context(), s.frames)
		s.result <- err
		return err
	})
	srv := httptest.NewUnstartedServer(e)
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/stream"
	return s
}

// open starts the request; the returned cancel disconnects the client.
func (s *sseServer) open(t *testing.T) (*http.Response, *bufio.Reader, context.CancelFunc) {
	t.Helper()
	// A bound so a broken stream fails the test instead of hanging it; not a timing assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body), cancel
}

// readFrame reads lines up to the blank line that ends a frame.
func readFrame(t *testing.T, r *bufio.Reader) []string {
	t.Helper()
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read after %q: %v", lines, err)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return lines
		}
		lines = append(lines, line)
	}
}

func waitResult(t *testing.T, s *sseServer) error {
	t.Helper()
	select {
	case err := <-s.result:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func equalLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("frame\n%q\nwant\n%q", got, want)
	}
}

func TestSSEFramesArriveOneByOne(t *testing.T) {
	t.Parallel()
	s := startSSE(t, httpx.SSEOptions{Keepalive: -1}, nil)
	resp, r, _ := s.open(t)

	for k, want := range map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache",
		"Connection":        "keep-alive",
		"X-Accel-Buffering": "no",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}

	// Each frame is read before the next is produced: it can only arrive if it was flushed.
	s.frames <- httpx.Frame{Event: "run", Data: map[string]string{"status": "running", "html": "<b>"}}
	equalLines(t, readFrame(t, r), "event: run", `data: {"html":"<b>","status":"running"}`)
	s.frames <- httpx.Frame{Event: "delta", ID: "2", Data: "hello"}
	equalLines(t, readFrame(t, r), "id: 2", "event: delta", "data: hello")
	s.frames <- httpx.Frame{Event: "delta", Data: []byte("line1\nline2\r\nevent: forged\rline4")}
	equalLines(t, readFrame(t, r), "event: delta", "data: line1", "data: line2", "data: event: forged", "data: line4")
	s.frames <- httpx.Frame{Data: "[DONE]"}
	equalLines(t, readFrame(t, r), "data: [DONE]")
	close(s.frames)

	if err := waitResult(t, s); err != nil {
		t.Fatalf("Run after frames closed: %v", err)
	}
	if rest, err := r.ReadString('\n'); err == nil || rest != "" {
		t.Fatalf("stream continued after Run returned: %q %v", rest, err)
	}
}

func TestSSEKeepalive(t *testing.T) {
	t.Parallel()
	// The server's WriteTimeout would cut a normal response after 100ms; the stream must
	// clear it and keep going well past that (ten 20ms keepalives take at least 200ms).
	s := startSSE(t, httpx.SSEOptions{Keepalive: 20 * time.Millisecond}, func(srv *http.Server) {
		srv.WriteTimeout = 100 * time.Millisecond
	})
	_, r, cancel := s.open(t)
	for range 10 {
		equalLines(t, readFrame(t, r), ": keepalive")
	}
	cancel()
	if err := waitResult(t, s); err != nil {
		t.Fatalf("Run after disconnect: %v", err)
	}
}

func TestSSEReturnsOnClientDisconnect(t *testing.T) {
	t.Parallel()
	s := startSSE(t, httpx.SSEOptions{Keepalive: -1}, nil)
	_, r, cancel := s.open(t)
	stream := <-s.sse
	s.frames <- httpx.Frame{Event: "x", Data: 1}
	equalLines(t, readFrame(t, r), "event: x", "data: 1")

	cancel()
	if err := waitResult(t, s); err != nil {
		t.Fatalf("Run after disconnect: %v", err)
	}
	if err := stream.Event("late", 1); !errors.Is(err, httpx.ErrStreamClosed) {
		t.Fatalf("write after Run returned: %v, want ErrStreamClosed", err)
	}
}

func TestSSEReturnsOnShutdown(t *testing.T) {
	t.Parallel()
	s := startSSE(t, httpx.SSEOptions{Keepalive: -1}, nil)
	_, r, _ := s.open(t)
	<-s.sse
	close(s.done)
	if err := waitResult(t, s); err != nil {
		t.Fatalf("Run after shutdown: %v", err)
	}
	// The handler returned, so the response ends and the client sees EOF.
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("stream still open after shutdown: %q", line)
	}
}

func TestSSEConcurrentWritersDoNotInterleave(t *testing.T) {
	t.Parallel()
	s := startSSE(t, httpx.SSEOptions{Keepalive: time.Millisecond}, nil)
	_, r, _ := s.open(t)
	stream := <-s.sse

	const writers, each = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				payload := strings.Repeat(fmt.Sprintf("%d-%d ", w, i), 200)
				if err := stream.Event(fmt.Sprintf("w%d", w), payload); err != nil {
					t.Errorf("Event: %v", err)
					return
				}
			}
		}()
	}
	seen := 0
	for seen < writers*each {
		lines := readFrame(t, r)
		if len(lines) == 1 && lines[0] == ": keepalive" {
			continue
		}
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: w") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("malformed or interleaved frame: %.200q", lines)
		}
		w := strings.TrimPrefix(lines[0], "event: w")
		if !strings.HasPrefix(lines[1], "data: "+w+"-") {
			t.Fatalf("event %s carries another writer's data: %.80q", w, lines[1])
		}
		seen++
	}
	wg.Wait()
	close(s.frames)
	if err := waitResult(t, s); err != nil {
		t.Fatal(err)
	}
}

func TestSSEDirectWrites(t *testing.T) {
	t.Parallel()
	s := startSSE(t, httpx.SSEOptions{Keepalive: -1}, nil)
	_, r, _ := s.open(t)
	stream := <-s.sse

	if err := stream.Comment("hello\nworld"); err != nil {
		t.Fatal(err)
	}
	equalLines(t, readFrame(t, r), ": hello", ": world")
	if err := stream.Event("span.open", struct {
		SpanID string `json:"spanId"`
	}{"s1"}); err != nil {
		t.Fatal(err)
	}
	equalLines(t, readFrame(t, r), "event: span.open", `data: {"spanId":"s1"}`)
	if err := stream.Data("[DONE]"); err != nil {
		t.Fatal(err)
	}
	equalLines(t, readFrame(t, r), "data: [DONE]")

	for _, f := range []httpx.Frame{{Event: "a\nevent: b", Data: 1}, {Event: "a", ID: "1\r2", Data: 1}} {
		if err := stream.Send(f); !errors.Is(err, httpx.ErrInvalidFrame) {
			t.Fatalf("frame %+v: %v, want ErrInvalidFrame", f, err)
		}
	}
	if err := stream.Event("x", func() {}); err == nil {
		t.Fatal("unencodable data accepted")
	}
	close(s.frames)
	if err := waitResult(t, s); err != nil {
		t.Fatal(err)
	}
}

// plainWriter cannot flush.
type plainWriter struct{ rec *httptest.ResponseRecorder }

func (p plainWriter) Header() http.Header         { return p.rec.Header() }
func (p plainWriter) Write(b []byte) (int, error) { return p.rec.Write(b) }
func (p plainWriter) WriteHeader(code int)        { p.rec.WriteHeader(code) }

func TestSSEUnflushableWriterIsAnErrorNotAPanic(t *testing.T) {
	t.Parallel()
	e := echo.New()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	c := e.NewContext(req, plainWriter{httptest.NewRecorder()})
	if _, err := httpx.NewSSE(c, httpx.SSEOptions{}); !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("NewSSE on an unflushable writer: %v", err)
	}
}

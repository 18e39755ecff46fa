package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// Defaults for SSEOptions.
const (
	DefaultSSEKeepalive    = 15 * time.Second // SPEC: ": keepalive" every 15 seconds
	DefaultSSEWriteTimeout = 30 * time.Second
)

// ErrStreamClosed is returned by writes on a stream that has already ended.
var ErrStreamClosed = errors.New("sse: stream closed")

// ErrInvalidFrame is returned for an event name or id that contains a line break, which
// would let a value inject its own SSE fields.
var ErrInvalidFrame = errors.New("sse: event name or id contains a line break")

// SSEOptions tunes a stream; the zero value gives the production behaviour.
type SSEOptions struct {
	// Keepalive is the interval of ": keepalive" comments sent by Run; 0 means
	// DefaultSSEKeepalive and a negative value turns them off.
	Keepalive time.Duration
	// Done is closed by the server at shutdown; Run returns when it is, because
	// http.Server.Shutdown waits for handlers and never cancels a stream on its own.
	Done <-chan struct{}
	// WriteTimeout bounds each frame's write so a client that stops reading cannot hold a
	// handler forever; 0 means DefaultSSEWriteTimeout and a negative value means no bound.
	WriteTimeout time.Duration
}

// Frame is one server-sent event; an empty Event gives a data-only frame such as
// "data: [DONE]".
type Frame struct {
	Event string // "event:" field; empty for none
	ID    string // "id:" field; empty for none
	Data  any    // string and []byte are sent as is, anything else as JSON
}

// SSE writes a text/event-stream response; its methods are safe for concurrent use.
type SSE struct {
	c            echo.Context
	rc           *http.ResponseController
	keepalive    time.Duration
	writeTimeout time.Duration
	done         <-chan struct{}

	mu     sync.Mutex // serialises frames so concurrent writers never interleave bytes
	buf    bytes.Buffer
	closed bool
}

// NewSSE sends the stream headers and status 200 and flushes them, so the client sees the
// stream open at once. It fails when the response cannot be flushed.
func NewSSE(c echo.Context, opts SSEOptions) (*SSE, error) {
	if opts.Keepalive == 0 {
		opts.Keepalive = DefaultSSEKeepalive
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultSSEWriteTimeout
	}
	// Flush through the writer echo wraps: echo.Response.Flush panics when flushing is
	// unsupported, while the ResponseController reports http.ErrNotSupported.
	s := &SSE{
		c:            c,
		rc:           http.NewResponseController(c.Response().Writer),
		keepalive:    opts.Keepalive,
		writeTimeout: opts.WriteTimeout,
		done:         opts.Done,
	}
	// A stream outlives any server-wide write timeout; per-frame deadlines replace it.
	if err := s.rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, fmt.Errorf("sse: clear write deadline: %w", err)
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // nginx would otherwise buffer the stream
	h.Del(echo.HeaderContentLength)
	c.Response().WriteHeader(http.StatusOK)
	if err := s.rc.Flush(); err != nil {
		return nil, fmt.Errorf("sse: flush: %w", err)
	}
	return s, nil
}

// Event sends a named event; data is sent as is when it is a string or []byte and as JSON
// otherwise.
func (s *SSE) Event(name string, data any) error {
	return s.Send(Frame{Event: name, Data: data})
}

// Data sends a data-only frame, e.g. Data("[DONE]").
func (s *SSE) Data(data string) error {
	return s.Send(Frame{Data: data})
}

// Comment sends a comment line (": text"), which clients ignore; proxies see traffic.
func (s *SSE) Comment(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Reset()
	for _, line := range splitLines(text) {
		s.buf.WriteString(": ")
		s.buf.WriteString(line)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteByte('\n')
	return s.flushLocked()
}

// Send writes one frame and flushes it.
func (s *SSE) Send(f Frame) error {
	if strings.ContainsAny(f.Event, "\r\n") || strings.ContainsAny(f.ID, "\r\n\x00") {
		return ErrInvalidFrame
	}
	data, err := encodeData(f.Data)
	if err != nil {
		return fmt.Errorf("sse: encode %q data: %w", f.Event, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Reset()
	if f.ID != "" {
		s.buf.WriteString("id: " + f.ID + "\n")
	}
	if f.Event != "" {
		s.buf.WriteString("event: " + f.Event + "\n")
	}
	// Every line of the payload gets its own "data:" field; clients join them with "\n".
	for _, line := range splitLines(data) {
		s.buf.WriteString("data: ")
		s.buf.WriteString(line)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteByte('\n')
	return s.flushLocked()
}

func (s *SSE) flushLocked() error {
	if s.closed {
		return ErrStreamClosed
	}
	if s.writeTimeout > 0 {
		if err := s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return fmt.Errorf("sse: set write deadline: %w", err)
		}
	}
	if _, err := s.c.Response().Write(s.buf.Bytes()); err != nil {
		s.closed = true
		return fmt.Errorf("sse: write: %w", err)
	}
	if err := s.rc.Flush(); err != nil {
		s.closed = true
		return fmt.Errorf("sse: flush: %w", err)
	}
	return nil
}

// Run sends frames as they arrive, with keepalive comments in between, until frames is
// closed, ctx or the request's context is done (client gone), or the shutdown channel
// closes; all of these are normal ends and return nil. It returns an error only when a
// write fails while the client is still connected. After Run returns, the stream is closed:
// producers must stop sending on frames (select on a context the handler cancels).
func (s *SSE) Run(ctx context.Context, frames <-chan Frame) error {
	defer s.close()
	reqCtx := s.c.Request().Context()
	var tick <-chan time.Time
	if s.keepalive > 0 {
		t := time.NewTicker(s.keepalive)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reqCtx.Done():
			return nil
		case <-s.done:
			return nil
		case <-tick:
			if err := s.Comment("keepalive"); err != nil {
				return s.writeErr(ctx, err)
			}
		case f, ok := <-frames:
			if !ok {
				return nil
			}
			if err := s.Send(f); err != nil {
				return s.writeErr(ctx, err)
			}
		}
	}
}

// writeErr hides the write error a departed client causes, which is not a server fault.
func (s *SSE) writeErr(ctx context.Context, err error) error {
	if ctx.Err() != nil || s.c.Request().Context().Err() != nil || errors.Is(err, ErrStreamClosed) {
		return nil
	}
	return err
}

func (s *SSE) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

func encodeData(v any) (string, error) {
	switch d := v.(type) {
	case string:
		return d, nil
	case []byte:
		return string(d), nil
	case json.RawMessage:
		return string(d), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the stream is not HTML; keep "<" readable
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// splitLines splits on every line terminator SSE recognises (CRLF, LF, CR), so no value
// can end a field early and smuggle in another.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}

package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/httpx"
)

// maxUpstreamError bounds how much of an upstream error body is read.
const maxUpstreamError = 64 << 10

// maxMessage bounds the upstream message quoted in our error.
const maxMessage = 1000

// exchange is one request to an upstream and its (not yet consumed) response.
type exchange struct {
	target Target
	up     *Upstream
	path   string
	wd     *watchdog
	resp   *http.Response
	body   io.Reader // resp.Body, kicking the watchdog
}

// close releases everything the exchange holds.
func (x *exchange) close() {
	if x.resp != nil {
		x.resp.Body.Close()
	}
	if x.wd != nil {
		x.wd.stop()
	}
	if x.up != nil && x.up.Release != nil {
		x.up.Release()
		x.up.Release = nil
	}
}

// bind looks the logical id up, checks that it serves modality, and acquires its upstream.
func (m *Module) bind(ctx context.Context, id, modality string) (Target, *Upstream, error) {
	t, err := m.models.Lookup(ctx, id)
	if err != nil {
		return Target{}, nil, err // the registry's model_not_found names the id (and engine-name hints)
	}
	if !t.supports(modality) {
		return Target{}, nil, ErrModalityNotSupported.Msg("model %s is registered for %s, not %s", quote(id), strings.Join(t.Modalities, ", "), modality)
	}
	b, ok := m.bindings[t.Binding]
	if !ok {
		return Target{}, nil, ErrEngineUnavailable.Msg("model %s has binding %q, which this inference plane cannot serve", quote(id), t.Binding)
	}
	up, err := b.Acquire(ctx, t)
	if err != nil {
		return Target{}, nil, err
	}
	return t, up, nil
}

// send posts body to the upstream's path. On success the caller owns the exchange and
// must close it; on failure everything is released and the error is a named one.
func (m *Module) send(c echo.Context, t Target, up *Upstream, path, contentType string, body io.Reader) (*exchange, error) {
	x := &exchange{target: t, up: up, path: path}
	ctx, wd := startWatchdog(c.Request().Context(), m.timeout)
	x.wd = wd
	if body != nil {
		body = activeReader{r: body, w: wd}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, joinURL(up.BaseURL, path), body)
	if err != nil {
		x.close()
		return nil, ErrUpstreamUnreachable.Msg("model %s has an unusable base URL %s", quote(t.LogicalID), redactURL(up.BaseURL)).Wrap(err)
	}
	req.Header.Set("Content-Type", contentType)
	if a := c.Request().Header.Get("Accept"); a != "" {
		req.Header.Set("Accept", a)
	}
	req.Header.Set("User-Agent", "svc-inference")
	if id := httpx.RequestID(c); id != "" {
		req.Header.Set(httpx.HeaderRequestID, id)
	}
	if up.Bearer != "" {
		req.Header.Set("Authorization", "Bearer "+up.Bearer)
	}
	client := m.client
	if up.Transport != nil {
		client = &http.Client{Transport: up.Transport, CheckRedirect: m.client.CheckRedirect}
	}
	resp, err := client.Do(req)
	if err != nil {
		terr := m.transportError(c.Request().Context(), x, err)
		x.close()
		return nil, terr
	}
	wd.kick()
	x.resp = resp
	x.body = activeReader{r: resp.Body, w: wd}
	if resp.StatusCode/100 != 2 {
		uerr := m.upstreamError(x)
		x.close()
		return nil, uerr
	}
	return x, nil
}

// transportError names a failure to get a response (or to read one) from the upstream.
func (m *Module) transportError(clientCtx context.Context, x *exchange, err error) error {
	if x.wd.timedOut() {
		return ErrUpstreamTimeout.Msg("the upstream of model %s sent nothing for %s (SERVICE_UPSTREAM_TIMEOUT)", quote(x.target.LogicalID), m.timeout).Wrap(err)
	}
	if clientCtx.Err() != nil {
		return ErrClientGone.Wrap(clientCtx.Err())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrUpstreamTimeout.Msg("the upstream of model %s at %s timed out", quote(x.target.LogicalID), redactURL(x.up.BaseURL)).Wrap(err)
	}
	return ErrUpstreamUnreachable.Msg("cannot reach the upstream of model %s at %s", quote(x.target.LogicalID), redactURL(x.up.BaseURL)).Wrap(err)
}

// upstreamError maps a non-2xx upstream answer to our error, quoting the upstream message.
func (m *Module) upstreamError(x *exchange) error {
	raw, _ := io.ReadAll(io.LimitReader(x.body, maxUpstreamError))
	status := x.resp.StatusCode
	msg, details := upstreamMessage(raw)
	msg = scrub(msg, x.up.Bearer)
	if details == nil {
		details = map[string]any{}
	}
	details["upstreamStatus"] = status
	id := quote(x.target.LogicalID)
	switch {
	case status == http.StatusNotFound:
		hint := ""
		if u, err := url.Parse(x.up.BaseURL); err == nil && !strings.Contains(u.Path, "/v1") {
			hint = fmt.Sprintf("; hint: the base URL %s has no /v1 path, while OpenAI-compatible servers usually serve under .../v1", redactURL(x.up.BaseURL))
		}
		return ErrModalityNotSupported.Msg("the upstream of model %s answered 404 for %s: the model does not support this modality%s%s", id, x.path, hint, suffix(msg)).WithDetails(details)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ErrUpstreamAuth.Msg("the upstream of model %s refused the request with HTTP %d; check the model's credentialRef%s", id, status, suffix(msg)).WithDetails(details)
	case status >= 500:
		return ErrUpstream.Msg("the upstream of model %s failed with HTTP %d%s", id, status, suffix(msg)).WithDetails(details)
	case status >= 400:
		e := ErrUpstream.Msg("the upstream of model %s rejected the request with HTTP %d%s", id, status, suffix(msg)).WithDetails(details)
		e.Status = status
		return e
	}
	return ErrUpstreamProtocol.Msg("the upstream of model %s answered HTTP %d", id, status).WithDetails(details)
}

// upstreamMessage extracts a message from the usual error bodies: OpenAI's
// {"error":{"message",...}}, {"error":"..."}, {"message":"..."}, {"detail":"..."}, or text.
func upstreamMessage(raw []byte) (string, map[string]any) {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	details := map[string]any{}
	if json.Unmarshal(raw, &env) == nil {
		var inner struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
			Param   any    `json:"param"`
		}
		var s string
		switch {
		case len(env.Error) > 0 && json.Unmarshal(env.Error, &inner) == nil && inner.Message != "":
			if inner.Type != "" {
				details["upstreamType"] = inner.Type
			}
			if inner.Code != nil {
				details["upstreamCode"] = inner.Code
			}
			if inner.Param != nil {
				details["upstreamParam"] = inner.Param
			}
			return clip(inner.Message), details
		case len(env.Error) > 0 && json.Unmarshal(env.Error, &s) == nil:
			return clip(s), details
		case env.Message != "":
			return clip(env.Message), details
		case len(env.Detail) > 0:
			if json.Unmarshal(env.Detail, &s) == nil {
				return clip(s), details
			}
			return clip(string(env.Detail)), details
		}
	}
	return clip(strings.TrimSpace(string(raw))), details
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// clip bounds a message and drops invalid UTF-8.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "")
	if len(s) > maxMessage {
		s = s[:maxMessage]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}

// scrub removes the bearer token from text quoted from the upstream: some providers echo
// the key they refused.
func scrub(s, secret string) string {
	if len(secret) < 4 {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

// quote renders a client-supplied id for a message, bounded.
func quote(id string) string {
	if len(id) > 200 {
		id = clip(id[:200]) + "…"
	}
	return fmt.Sprintf("%q", id)
}

// joinURL appends an OpenAI path (/chat/completions) to a base URL (…/v1).
func joinURL(base, path string) string {
	return strings.TrimRight(base, "/") + path
}

// redactURL shows scheme, host and path of a base URL: no user info, no query.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// relay writes the upstream's answer to the client as it arrives: each chunk read from the
// upstream is written and flushed at once, so stream events are never held back.
func (m *Module) relay(c echo.Context, x *exchange) error {
	res := c.Response()
	h := res.Header()
	for _, k := range []string{"Content-Type", "Cache-Control", "Content-Disposition", "Content-Language"} {
		if v := x.resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	sse := strings.HasPrefix(x.resp.Header.Get("Content-Type"), "text/event-stream")
	if sse {
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	} else if x.resp.ContentLength >= 0 {
		h.Set("Content-Length", fmt.Sprint(x.resp.ContentLength))
	}
	// Like httputil.ReverseProxy: flush at once for event streams and bodies of unknown
	// length (chunked streams); a body of known length is written through without the
	// extra syscalls.
	flush := sse || x.resp.ContentLength < 0
	res.WriteHeader(x.resp.StatusCode)
	if flush {
		res.Flush()
	}
	bp, _ := m.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 32<<10)
		bp = &b
	}
	defer m.bufs.Put(bp)
	buf := *bp
	for {
		n, rerr := x.body.Read(buf)
		if n > 0 {
			if _, werr := res.Write(buf[:n]); werr != nil {
				return nil // the client went away; the upstream request is cancelled with it
			}
			if flush {
				res.Flush()
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return m.midStreamError(c, x, sse, rerr)
		}
	}
}

// midStreamError ends a response whose status is already sent. A stream gets a final
// error event in the OpenAI shape (SDKs raise it); any other body is aborted so the client
// cannot mistake a truncated body for a complete one.
func (m *Module) midStreamError(c echo.Context, x *exchange, sse bool, cause error) error {
	if c.Request().Context().Err() != nil {
		return nil
	}
	ae := ErrUpstream.Msg("the upstream of model %s broke off its response", quote(x.target.LogicalID)).Wrap(cause)
	if x.wd.timedOut() {
		ae = ErrUpstreamTimeout.Msg("the upstream of model %s stopped sending for %s (SERVICE_UPSTREAM_TIMEOUT)", quote(x.target.LogicalID), m.timeout).Wrap(cause)
	}
	m.log.Warn().Str("request_id", httpx.RequestID(c)).Str("model", x.target.LogicalID).Str("code", ae.Code).Err(ae).Msg("upstream stream broken")
	if !sse {
		panic(http.ErrAbortHandler)
	}
	frame, _ := json.Marshal(httpx.OpenAIEnvelope{Error: httpx.OpenAIError{Message: ae.Message, Type: "server_error", Code: ae.Code}})
	res := c.Response()
	_, _ = fmt.Fprintf(res, "data: %s\n\n", frame)
	res.Flush()
	return nil
}

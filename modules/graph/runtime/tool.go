package runtime

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/apperr"
)

// Tool limits.
const (
	defaultToolTimeout = 30 * time.Second
	// maxToolResponse bounds an http tool's response body; a larger one is an err value.
	maxToolResponse = 10 << 20
)

// Codes of values a tool node puts on its err port.
const (
	ToolErrHTTPStatus   = "http_status"
	ToolErrNetwork      = "network_error"
	ToolErrTimeout      = "timeout"
	ToolErrConnection   = "connection_error"
	ToolErrBadRequest   = "invalid_request"
	ToolErrTooLarge     = "response_too_large"
	ToolErrMCP          = "mcp_error"
	ToolErrMCPMissing   = "mcp_unavailable"
	ToolErrUnknownType  = "unknown_tool_type"
	ToolErrNoConnection = "connection_unavailable"
)

// execTool runs an http or mcp tool. Failures that belong to the world (status, network,
// timeout, connection) become a value on err and the run goes on; template faults fail the run.
func (r *run) execTool(ctx context.Context, pn *pnode, inputs map[string]any, sc scope) outcome {
	key := sc.key(pn.node.ID)
	spec := pn.node.Tool
	if spec == nil {
		return r.toolFailed(pn, sc, Attribution{}, &NodeError{Code: ToolErrUnknownType, Message: "tool node has no tool"})
	}
	timeout := defaultToolTimeout
	if pn.node.TimeoutMs > 0 {
		timeout = time.Duration(pn.node.TimeoutMs) * time.Millisecond
	}
	switch spec.Type {
	case "http":
		return r.execHTTP(ctx, pn, key, spec, inputs, sc, timeout)
	case "mcp":
		return r.execMCP(ctx, pn, key, spec, inputs, sc, timeout)
	}
	return r.toolFailed(pn, sc, Attribution{ToolType: spec.Type}, &NodeError{Code: ToolErrUnknownType, Message: fmt.Sprintf("unknown tool type %q", spec.Type)})
}

// toolFailed puts e on err. When err has no edge the run notes the failure.
func (r *run) toolFailed(pn *pnode, sc scope, attr Attribution, e *NodeError) outcome {
	res := NodeResult{Status: NodeFailed, Ports: map[string]any{graph.PortErr: nodeErrorValue(e)}, Error: e}
	if !pn.wired[graph.PortErr] {
		res.Note = fmt.Sprintf("tool node %q failed: %s: %s", sc.key(pn.node.ID), e.Code, e.Message)
	}
	return outcome{res: res, attr: attr}
}

// nodeErrorValue is the err port value {code, message, status?}.
func nodeErrorValue(e *NodeError) map[string]any {
	v := map[string]any{"code": e.Code, "message": e.Message}
	if e.Status != 0 {
		v["status"] = e.Status
	}
	return v
}

func (r *run) execHTTP(ctx context.Context, pn *pnode, key string, spec *graph.ToolSpec, inputs map[string]any, sc scope, timeout time.Duration) outcome {
	attr := Attribution{ToolType: "http", Connection: spec.Connection}
	method := strings.ToUpper(spec.Method)
	if method == "" {
		method = http.MethodGet
		if spec.Body != nil {
			method = http.MethodPost
		}
	}
	rawURL, err := renderString(key, "tool.url", spec.URL, inputs)
	if err != nil {
		return outcome{err: err}
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrBadRequest, Message: "url must be an absolute http or https address"})
	}
	attr.ToolHost = u.Hostname()
	headers := make(http.Header, len(spec.Headers))
	for name, tmpl := range spec.Headers {
		v, err := renderString(key, "tool.headers."+name, tmpl, inputs)
		if err != nil {
			return outcome{err: err}
		}
		headers.Set(name, v)
	}
	var body io.Reader
	if spec.Body != nil {
		b, err := renderValue(key, "tool.body", spec.Body, inputs)
		if err != nil {
			return outcome{err: err}
		}
		if s, isStr := b.(string); isStr {
			body = strings.NewReader(s)
			if headers.Get("Content-Type") == "" {
				headers.Set("Content-Type", "text/plain; charset=utf-8")
			}
		} else {
			raw, err := json.Marshal(b)
			if err != nil {
				return r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrBadRequest, Message: "body is not JSON-serialisable"})
			}
			body = bytes.NewReader(raw)
			if headers.Get("Content-Type") == "" {
				headers.Set("Content-Type", "application/json")
			}
		}
	}
	if spec.Connection != "" {
		cred, e := r.resolveConnection(ctx, spec.Connection)
		if e != nil {
			if ctx.Err() != nil {
				return outcome{err: ErrCanceled.Wrap(ctx.Err())}
			}
			return r.toolFailed(pn, sc, attr, e)
		}
		applyCredential(u, headers, cred)
	}

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, method, u.String(), body)
	if err != nil {
		return r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrBadRequest, Message: fmt.Sprintf("invalid request: method %q", method)})
	}
	req.Header = headers
	hc := r.e.http
	if spec.Connection != "" {
		hc = sameHostRedirects(hc)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{err: ErrCanceled.Wrap(ctx.Err())}
		}
		if errors.Is(err, context.DeadlineExceeded) || cctx.Err() != nil {
			return r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrTimeout, Message: fmt.Sprintf("no answer within %s", timeout)})
		}
		return r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrNetwork, Message: networkMessage(err)})
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxToolResponse+1))
	if err != nil {
		if ctx.Err() != nil {
			return outcome{err: ErrCanceled.Wrap(ctx.Err())}
		}
		if cctx.Err() != nil {
			return r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrTimeout, Message: fmt.Sprintf("response not complete within %s", timeout), Status: resp.StatusCode})
		}
		return r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrNetwork, Message: "response body broken: " + networkMessage(err), Status: resp.StatusCode})
	}
	if len(raw) > maxToolResponse {
		return r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrTooLarge, Message: fmt.Sprintf("response larger than %d bytes", maxToolResponse), Status: resp.StatusCode})
	}
	decoded := decodeBody(resp.Header.Get("Content-Type"), raw)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		o := r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrHTTPStatus, Message: fmt.Sprintf("HTTP %d", resp.StatusCode), Status: resp.StatusCode})
		// The body helps the graph decide what to do (rate limit, validation message, …).
		o.res.Ports[graph.PortErr].(map[string]any)["body"] = decoded
		return o
	}
	hdrs := make(map[string]any, len(resp.Header))
	for k, vs := range resp.Header {
		hdrs[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	out := map[string]any{"status": resp.StatusCode, "headers": hdrs, "body": decoded}
	o := ok(graph.PortOut, out)
	o.attr = attr
	return o
}

// sameHostRedirects returns a copy of c that follows redirects only within the original host:
// a connection's secret (in any header or the query) must not travel to another server. A
// cross-host redirect is returned as the response itself (a 3xx, so a value on err).
func sameHostRedirects(c *http.Client) *http.Client {
	cp := *c
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &cp
}

// decodeBody decodes JSON bodies (application/json, +json) and returns others as text.
func decodeBody(contentType string, raw []byte) any {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			return v
		}
	}
	return string(raw)
}

// networkMessage describes a transport failure without the URL, whose query may carry a secret.
func networkMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// resolveConnection asks the resolver; its error code (when it has one) names the cause.
func (r *run) resolveConnection(ctx context.Context, name string) (Credential, *NodeError) {
	if r.e.deps.Connections == nil {
		return Credential{}, &NodeError{Code: ToolErrNoConnection, Message: fmt.Sprintf("connection %q cannot be resolved: no connection store", name)}
	}
	cred, err := r.e.deps.Connections.Resolve(ctx, name)
	if err != nil {
		code := ToolErrConnection
		msg := fmt.Sprintf("connection %q could not be resolved", name)
		if ae := apperr.From(err); ae != nil {
			code, msg = ae.Code, fmt.Sprintf("connection %q: %s", name, ae.Message)
		}
		return Credential{}, &NodeError{Code: code, Message: msg}
	}
	return cred, nil
}

// applyCredential adds the connection's secret to the request.
func applyCredential(u *url.URL, h http.Header, c Credential) {
	if c.Header != "" {
		h.Set(c.Header, c.Value)
	}
	if len(c.Query) > 0 {
		q := u.Query()
		for k, v := range c.Query {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	if c.Basic != nil {
		u.User = nil
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(c.Basic.Username+":"+c.Basic.Password)))
	}
}

func (r *run) execMCP(ctx context.Context, pn *pnode, key string, spec *graph.ToolSpec, inputs map[string]any, sc scope, timeout time.Duration) outcome {
	attr := Attribution{ToolType: "mcp", MCPServer: spec.Server, ToolName: spec.Name, Connection: spec.Connection}
	var args any = map[string]any{}
	if spec.Arguments != nil {
		var err error
		args, err = renderValue(key, "tool.arguments", spec.Arguments, inputs)
		if err != nil {
			return outcome{err: err}
		}
	}
	if r.e.deps.MCP == nil {
		return r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrMCPMissing, Message: "no MCP client configured"})
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := r.e.deps.MCP.CallTool(cctx, spec.Server, spec.Name, args, spec.Connection)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{err: ErrCanceled.Wrap(ctx.Err())}
		}
		if cctx.Err() != nil {
			return r.toolFailed(pn, sc, attr, &NodeError{Code: ToolErrTimeout, Message: fmt.Sprintf("no answer within %s", timeout)})
		}
		e := &NodeError{Code: ToolErrMCP, Message: err.Error()}
		if ae := apperr.From(err); ae != nil {
			e.Code, e.Message = ae.Code, ae.Message
		}
		return r.toolFailed(pn, sc, attr, e)
	}
	o := ok(graph.PortOut, res)
	o.attr = attr
	return o
}

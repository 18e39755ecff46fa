package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/client"
)

// execLLM calls the model through the inference plane, streaming deltas as events. A model
// error fails the node (no port carries a value) and the run notes it; finish_reason=length
// keeps the answer and notes the truncation.
func (r *run) execLLM(ctx context.Context, pn *pnode, inputs map[string]any, sc scope) outcome {
	n := pn.node
	key := sc.key(n.ID)
	attr := Attribution{Model: n.Model}
	req := client.ChatRequest{Model: n.Model}
	if n.System != "" {
		s, err := renderString(key, "system", n.System, inputs)
		if err != nil {
			return outcome{err: err}
		}
		req.Messages = append(req.Messages, client.ChatMessage{Role: "system", Content: s})
	}
	for i, m := range n.Messages {
		c, err := renderString(key, fmt.Sprintf("messages[%d].content", i), m.Content, inputs)
		if err != nil {
			return outcome{err: err}
		}
		req.Messages = append(req.Messages, client.ChatMessage{Role: m.Role, Content: c})
	}
	switch {
	case n.Prompt != "":
		p, err := renderString(key, "prompt", n.Prompt, inputs)
		if err != nil {
			return outcome{err: err}
		}
		req.Messages = append(req.Messages, client.ChatMessage{Role: "user", Content: p})
	case len(n.Messages) == 0:
		// Neither prompt nor messages: the node's input is the prompt.
		p, err := renderString(key, "prompt", "$in.in", inputs)
		if err != nil {
			return outcome{err: err}
		}
		req.Messages = append(req.Messages, client.ChatMessage{Role: "user", Content: p})
	}
	applyParams(&req, n.Params)
	wantJSON := n.ResponseFormat == "json"
	if wantJSON {
		if n.JSONSchema != nil {
			req.ResponseFormat = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "output", "schema": n.JSONSchema}}
		} else {
			req.ResponseFormat = map[string]any{"type": "json_object"}
		}
	}

	failed := func(e *NodeError) outcome {
		return outcome{attr: attr, res: NodeResult{Status: NodeFailed, Error: e,
			Note: fmt.Sprintf("llm node %q failed: %s: %s", key, e.Code, e.Message)}}
	}
	if r.e.deps.Models == nil {
		return failed(&NodeError{Code: "inference_unavailable", Message: "no inference client configured"})
	}
	cctx := ctx
	if n.TimeoutMs > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, time.Duration(n.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	onDelta := func(d client.Delta) {
		if d.Reasoning != "" {
			r.sink.Emit(Event{Type: EventReasoning, RunID: r.id, NodeID: key, Kind: graph.KindLLM, Parent: sc.parent, Text: d.Reasoning})
		}
		if d.Content != "" {
			r.sink.Emit(Event{Type: EventDelta, RunID: r.id, NodeID: key, Kind: graph.KindLLM, Parent: sc.parent, Text: d.Content})
		}
	}
	res, err := r.e.deps.Models.ChatStream(cctx, req, onDelta)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{err: ErrCanceled.Wrap(ctx.Err())}
		}
		if cctx.Err() != nil {
			return failed(&NodeError{Code: "timeout", Message: fmt.Sprintf("model did not finish within %dms", n.TimeoutMs)})
		}
		e := &NodeError{Code: "model_error", Message: "model call failed"}
		if ae := apperr.From(err); ae != nil {
			e = &NodeError{Code: ae.Code, Message: ae.Message, Status: ae.Status}
		}
		return failed(e)
	}
	attr.TokensIn, attr.TokensOut = res.Usage.PromptTokens, res.Usage.CompletionTokens
	out := map[string]any{
		"text":         res.Text,
		"finishReason": res.FinishReason,
		"usage": map[string]any{
			"promptTokens":     res.Usage.PromptTokens,
			"completionTokens": res.Usage.CompletionTokens,
			"totalTokens":      res.Usage.TotalTokens,
		},
	}
	if res.Reasoning != "" {
		out["reasoning"] = res.Reasoning
	}
	o := ok(graph.PortOut, out)
	o.attr = attr
	if res.FinishReason == "length" {
		o.res.Note = fmt.Sprintf("llm node %q stopped at its token limit (finish_reason=length); the answer may be cut short", key)
	}
	if wantJSON {
		v, err := parseJSONAnswer(res.Text)
		if err != nil {
			f := failed(&NodeError{Code: "invalid_json_output", Message: "the model's answer is not valid JSON"})
			if o.res.Note != "" {
				f.res.Note = o.res.Note + "; " + f.res.Note
			}
			return f
		}
		out["json"] = v
	}
	return o
}

// parseJSONAnswer parses a JSON answer, tolerating a Markdown code fence around it.
func parseJSONAnswer(text string) (any, error) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(t, "```")
		t = strings.TrimLeftFunc(strings.TrimPrefix(t, "json"), unicode.IsSpace)
		t = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(t), "```"))
	}
	var v any
	if err := json.Unmarshal([]byte(t), &v); err != nil {
		return nil, err
	}
	return v, nil
}

// applyParams maps the node's camelCase params onto the request: the common ones to typed
// fields, every other one to its snake_case wire name.
func applyParams(req *client.ChatRequest, params map[string]any) {
	for k, v := range params {
		switch k {
		case "temperature":
			if f, isNum := toFloat(v); isNum {
				req.Temperature = &f
				continue
			}
		case "topP":
			if f, isNum := toFloat(v); isNum {
				req.TopP = &f
				continue
			}
		case "maxTokens":
			if f, isNum := toFloat(v); isNum {
				n := int(f)
				req.MaxTokens = &n
				continue
			}
		case "stop":
			switch s := v.(type) {
			case string:
				req.Stop = []string{s}
				continue
			case []any:
				for _, e := range s {
					if str, isStr := e.(string); isStr {
						req.Stop = append(req.Stop, str)
					}
				}
				continue
			case []string:
				req.Stop = s
				continue
			}
		}
		if req.Extra == nil {
			req.Extra = map[string]any{}
		}
		req.Extra[snakeCase(k)] = v
	}
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// snakeCase turns camelCase into snake_case (topK → top_k); snake_case stays as it is.
func snakeCase(s string) string {
	var b strings.Builder
	for i, c := range s {
		if unicode.IsUpper(c) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

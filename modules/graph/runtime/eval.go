package runtime

import (
	"errors"

	"github.com/expr-lang/expr/vm"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/apperr"
)

// compileExpr compiles an expression over {"$in": inputs} (graph.CompileExpr's limits apply).
func compileExpr(src string) (*vm.Program, error) { return graph.CompileExpr(src) }

// runExpr evaluates a compiled expression under the memory budget graph.RunExpr sets.
func runExpr(p *vm.Program, inputs map[string]any) (any, error) { return graph.RunExpr(p, inputs) }

// templateError names the node, the field, the token and what was missing.
func templateError(node, field string, err error) error {
	d := map[string]any{"node": node, "field": field}
	var te *graph.TokenError
	if errors.As(err, &te) {
		d["token"] = te.Token.Raw
		d["missing"] = te.Missing
		d["reason"] = te.Reason
		return ErrTemplate.Msg("node %q, %s: token %s did not resolve: %s is absent (%s)", node, field, te.Token.Raw, te.Missing, te.Reason).WithDetails(d)
	}
	return ErrTemplate.Msg("node %q, %s: %v", node, field, err).WithDetails(d)
}

// exprError wraps an expression failure in base (transform_error, router_error, …) with the
// node, the field and the position in the source.
func exprError(base *apperr.Error, node, field string, err error) error {
	d := map[string]any{"node": node, "field": field}
	var ee *graph.ExprError
	if errors.As(err, &ee) {
		if ee.Line > 0 {
			d["line"] = ee.Line
			d["column"] = ee.Column + 1
		}
		if ee.Pos >= 0 {
			d["position"] = ee.Pos
		}
		return base.Msg("node %q, %s: %s", node, field, ee.Error()).WithDetails(d)
	}
	return base.Msg("node %q, %s: %v", node, field, err).WithDetails(d)
}

// render evaluates a template field; failures are template_error.
func render(node, field, s string, inputs map[string]any) (any, error) {
	v, err := graph.Render(s, inputs)
	if err != nil {
		return nil, templateError(node, field, err)
	}
	return v, nil
}

// renderString evaluates a text template field (non-string single tokens become JSON).
func renderString(node, field, s string, inputs map[string]any) (string, error) {
	v, err := graph.RenderString(s, inputs)
	if err != nil {
		return "", templateError(node, field, err)
	}
	return v, nil
}

// renderValue evaluates every string inside a structured field.
func renderValue(node, field string, v any, inputs map[string]any) (any, error) {
	out, err := graph.RenderValue(v, inputs)
	if err != nil {
		return nil, templateError(node, field, err)
	}
	return out, nil
}

package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/svc-dev/svc/modules/graph"
)

// execTransform evaluates the expression; its value leaves on out.
func (r *run) execTransform(pn *pnode, inputs map[string]any, sc scope) outcome {
	key := sc.key(pn.node.ID)
	if pn.progErr != nil {
		return outcome{err: exprError(ErrTransform, key, "expr", pn.progErr)}
	}
	v, err := runExpr(pn.prog, inputs)
	if err != nil {
		return outcome{err: exprError(ErrTransform, key, "expr", err)}
	}
	return ok(graph.PortOut, v)
}

// execRouter selects one declared handle; the input passes on it and the others are dead.
func (r *run) execRouter(pn *pnode, inputs map[string]any, sc scope) outcome {
	key := sc.key(pn.node.ID)
	var (
		sel any
		err error
	)
	switch {
	case pn.selTok != nil:
		sel, err = graph.Resolve(*pn.selTok, inputs)
		if err != nil {
			return outcome{err: templateError(key, "select", err)}
		}
	case pn.progErr != nil:
		return outcome{err: exprError(ErrRouter, key, "select", pn.progErr)}
	default:
		sel, err = runExpr(pn.prog, inputs)
		if err != nil {
			return outcome{err: exprError(ErrRouter, key, "select", err)}
		}
	}
	handle, isScalar := handleText(sel)
	if !isScalar || !slices.Contains(pn.node.Handles, handle) {
		shown := handle
		if !isScalar {
			shown = fmt.Sprintf("a %s", jsonKind(sel))
		}
		return outcome{err: ErrRouter.Msg("node %q: select gave %q, which is not one of the declared handles %v", key, shown, pn.node.Handles).
			WithDetails(map[string]any{"node": key, "value": sel, "handles": pn.node.Handles})}
	}
	return ok(handle, inputs[graph.PortIn])
}

// handleText turns a select value into a handle name: strings as they are, booleans and
// numbers in their JSON spelling ("true", "3"); other values name no handle.
func handleText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "list"
	}
	return fmt.Sprintf("%T", v)
}

// execOutput delivers the graph's output: value (template or token), default the whole $in.in.
func (r *run) execOutput(pn *pnode, inputs map[string]any, sc scope) outcome {
	var v any = inputs[graph.PortIn]
	if pn.node.Value != nil {
		var err error
		v, err = renderValue(sc.key(pn.node.ID), "value", pn.node.Value, inputs)
		if err != nil {
			return outcome{err: err}
		}
	}
	return outcome{res: NodeResult{Status: NodeOK, Value: v}, isOutput: true}
}

// execHuman parks the run. A resumed run never gets here: the resume input is saved as the
// node's result and restored instead of executing the node.
func (r *run) execHuman(pn *pnode, inputs map[string]any, sc scope) outcome {
	key := sc.key(pn.node.ID)
	prompt := ""
	if pn.node.Prompt != "" {
		var err error
		prompt, err = renderString(key, "prompt", pn.node.Prompt, inputs)
		if err != nil {
			return outcome{err: err}
		}
	}
	return outcome{park: &park{node: key, prompt: prompt}}
}

// execGuardrail runs the check expression and the built-ins; the input leaves on pass, or on
// fail as {value, reason} with the first failing check's reason.
func (r *run) execGuardrail(pn *pnode, inputs map[string]any, sc scope) outcome {
	key := sc.key(pn.node.ID)
	in := inputs[graph.PortIn]
	if pn.checksErr != nil {
		return outcome{err: ErrGuardrail.Msg("node %q: %v", key, pn.checksErr).WithDetails(map[string]any{"node": key, "field": "checks"})}
	}
	fail := func(reason string) outcome {
		return ok(graph.PortFail, map[string]any{"value": in, "reason": reason})
	}
	if pn.node.Check != "" {
		if pn.progErr != nil {
			return outcome{err: exprError(ErrGuardrail, key, "check", pn.progErr)}
		}
		v, err := runExpr(pn.prog, inputs)
		if err != nil {
			return outcome{err: exprError(ErrGuardrail, key, "check", err)}
		}
		passed, isBool := v.(bool)
		if !isBool {
			return outcome{err: ErrGuardrail.Msg("node %q: check gave a %s, not a boolean", key, jsonKind(v)).WithDetails(map[string]any{"node": key, "field": "check"})}
		}
		if !passed {
			return fail("check failed: " + pn.node.Check)
		}
	}
	for i, c := range pn.checks {
		val := in
		if c.field != nil {
			var err error
			val, err = graph.Resolve(*c.field, inputs)
			if err != nil {
				return outcome{err: templateError(key, fmt.Sprintf("checks[%d].field", i), err)}
			}
		}
		if reason, passed := c.eval(val); !passed {
			if c.spec.Message != "" {
				reason = c.spec.Message
			}
			return fail(reason)
		}
	}
	return ok(graph.PortPass, in)
}

// eval runs one built-in check; reason says why it failed.
func (c *compiledCheck) eval(v any) (reason string, passed bool) {
	switch c.spec.Type {
	case "maxLength":
		if n := valueLength(v); n > c.spec.Max {
			return fmt.Sprintf("length %d exceeds maximum %d", n, c.spec.Max), false
		}
	case "minLength":
		if n := valueLength(v); n < c.spec.Min {
			return fmt.Sprintf("length %d is below minimum %d", n, c.spec.Min), false
		}
	case "notEmpty":
		if isEmpty(v) {
			return "value is empty", false
		}
	case "denyPatterns":
		text := valueText(v)
		for _, re := range c.regexps {
			if re.MatchString(text) {
				return fmt.Sprintf("value matches denied pattern %q", re.String()), false
			}
		}
	case "requirePatterns":
		text := valueText(v)
		for _, re := range c.regexps {
			if !re.MatchString(text) {
				return fmt.Sprintf("value does not match required pattern %q", re.String()), false
			}
		}
	case "jsonSchema":
		inst, err := graph.ToSchemaInstance(v)
		if err != nil {
			return "value is not JSON: " + err.Error(), false
		}
		if err := c.schema.Validate(inst); err != nil {
			return "value does not match the schema: " + schemaReason(err), false
		}
	}
	return "", true
}

// valueLength counts characters of strings, elements of lists and keys of objects; any other
// value counts the characters of its JSON text.
func valueLength(v any) int {
	switch x := v.(type) {
	case string:
		return utf8.RuneCountInString(x)
	case []any:
		return len(x)
	case map[string]any:
		return len(x)
	}
	return utf8.RuneCountInString(valueText(v))
}

// valueText is the text patterns are matched against: strings as they are, else compact JSON.
func valueText(v any) string {
	if s, isStr := v.(string); isStr {
		return s
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(x) == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// schemaReason keeps the validator's findings ("at '/name': missing property 'x'") and drops
// its header line, which only names the schema's internal location.
func schemaReason(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) > 1 {
		lines = lines[1:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimLeft(strings.TrimSpace(l), "- ")
	}
	return strings.Join(lines, "; ")
}

package graph

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// Expression limits. expr-lang has no cancellation while running, so size and memory are bounded.
const (
	// MaxExprLength bounds the source length of one expression (bytes).
	MaxExprLength = 16 << 10
	// MaxExprNodes bounds the AST size of one expression.
	MaxExprNodes = 2000
	// ExprMemoryBudget bounds the allocations (in expr-lang's units) of one evaluation.
	ExprMemoryBudget = 1_000_000
)

// EnvName is the single variable of the expression environment: input port name → value.
const EnvName = "$in"

// Names of the member-access helpers the compiler patches in. They start with "$" so they
// cannot collide with anything a user would name.
const (
	fnStrictGet  = "$get"
	fnLenientGet = "$getOrNil"
)

// ExprError is an expression failure (syntax, type or run time) with its position in the source.
type ExprError struct {
	Source  string
	Message string
	Line    int // 1-based; 0 when unknown
	Column  int // 0-based column in runes
	Pos     int // 0-based offset in runes from the start of the source; -1 when unknown
}

func (e *ExprError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s (line %d, column %d)", e.Message, e.Line, e.Column+1)
	}
	return e.Message
}

// MissingError is the run-time error of a member access naming something absent.
type MissingError struct {
	Key  any    // the absent key or index
	What string // "no such key", "index out of range", …
}

func (e *MissingError) Error() string {
	if s, ok := e.Key.(string); ok {
		return fmt.Sprintf("field %q is absent (%s)", s, e.What)
	}
	return fmt.Sprintf("element %v is absent (%s)", e.Key, e.What)
}

func toExprError(src string, err error) *ExprError {
	var fe *file.Error
	if errors.As(err, &fe) {
		return &ExprError{Source: src, Message: fe.Message, Line: fe.Line, Column: fe.Column, Pos: fe.From}
	}
	return &ExprError{Source: src, Message: err.Error(), Pos: -1}
}

// strictMembers rewrites every plain member access `a.b` / `a[k]` into $get(a, k), which fails
// when the key is absent (expr-lang itself yields nil). Optional access `a?.b` stays lenient,
// and so does the left operand of `??`, so `$in.in.x ?? "default"` works as people expect.
type strictMembers struct{}

func (strictMembers) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.MemberNode:
		if n.Optional || n.Method {
			return
		}
		ast.Patch(node, &ast.CallNode{
			Callee:    &ast.IdentifierNode{Value: fnStrictGet},
			Arguments: []ast.Node{n.Node, n.Property},
		})
	case *ast.BinaryNode:
		if n.Operator == "??" {
			makeLenient(n.Left)
		}
	}
}

// makeLenient turns the strict accesses of a member chain (already patched, as the walk is
// post-order) into lenient ones.
func makeLenient(n ast.Node) {
	for {
		switch x := n.(type) {
		case *ast.CallNode:
			id, ok := x.Callee.(*ast.IdentifierNode)
			if !ok || id.Value != fnStrictGet || len(x.Arguments) != 2 {
				return
			}
			id.Value = fnLenientGet
			n = x.Arguments[0]
		case *ast.ChainNode:
			n = x.Node
		case *ast.MemberNode:
			n = x.Node
		default:
			return
		}
	}
}

// member reads key from v; lenient returns nil instead of failing when it is absent.
func member(v, key any, lenient bool) (any, error) {
	out, what := lookup(v, key)
	if what == "" {
		return out, nil
	}
	if lenient {
		return nil, nil
	}
	return nil, &MissingError{Key: key, What: what}
}

func lookup(v, key any) (any, string) {
	switch c := v.(type) {
	case nil:
		return nil, "value is null"
	case map[string]any:
		k, ok := key.(string)
		if !ok {
			return nil, "object keys are strings"
		}
		x, ok := c[k]
		if !ok {
			return nil, "no such key"
		}
		return x, ""
	case []any:
		i, ok := toIndex(key)
		if !ok {
			return nil, "list index must be an integer"
		}
		if i < 0 {
			i += len(c)
		}
		if i < 0 || i >= len(c) {
			return nil, "index out of range"
		}
		return c[i], ""
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return nil, "value is null"
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Map:
		kv := reflect.ValueOf(key)
		if !kv.IsValid() || !kv.Type().ConvertibleTo(rv.Type().Key()) {
			return nil, "key of the wrong type"
		}
		x := rv.MapIndex(kv.Convert(rv.Type().Key()))
		if !x.IsValid() {
			return nil, "no such key"
		}
		return x.Interface(), ""
	case reflect.Slice, reflect.Array, reflect.String:
		i, ok := toIndex(key)
		if !ok {
			return nil, "index must be an integer"
		}
		if rv.Kind() == reflect.String {
			// Same semantics as expr-lang: index into runes.
			r := []rune(rv.String())
			if i < 0 {
				i += len(r)
			}
			if i < 0 || i >= len(r) {
				return nil, "index out of range"
			}
			return string(r[i]), ""
		}
		if i < 0 {
			i += rv.Len()
		}
		if i < 0 || i >= rv.Len() {
			return nil, "index out of range"
		}
		return rv.Index(i).Interface(), ""
	case reflect.Struct:
		name, ok := key.(string)
		if !ok {
			return nil, "field name must be a string"
		}
		f := rv.FieldByName(name)
		if !f.IsValid() || !f.CanInterface() {
			return nil, "no such field"
		}
		return f.Interface(), ""
	}
	return nil, fmt.Sprintf("cannot read a member of %T", v)
}

func toIndex(k any) (int, bool) {
	switch x := k.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		if x == float64(int(x)) {
			return int(x), true
		}
	case int32:
		return int(x), true
	}
	return 0, false
}

func exprOptions() []expr.Option {
	return []expr.Option{
		expr.Env(map[string]any{EnvName: map[string]any{}}),
		expr.MaxNodes(MaxExprNodes),
		expr.Function(fnStrictGet, func(args ...any) (any, error) {
			return member(args[0], args[1], false)
		}),
		expr.Function(fnLenientGet, func(args ...any) (any, error) {
			return member(args[0], args[1], true)
		}),
		expr.Patch(strictMembers{}),
	}
}

// CompileExpr compiles an expression over the environment {"$in": inputs}. Unknown variables,
// syntax and type errors are reported here as *ExprError.
func CompileExpr(src string) (*vm.Program, error) {
	if len(src) > MaxExprLength {
		return nil, &ExprError{Source: "", Message: fmt.Sprintf("expression longer than %d bytes", MaxExprLength), Pos: -1}
	}
	p, err := expr.Compile(src, exprOptions()...)
	if err != nil {
		return nil, toExprError(src, err)
	}
	return p, nil
}

// RunExpr evaluates a compiled expression with $in bound to inputs (input port name → value).
// A plain member access naming something absent fails (use `?.` or `??` for optional data);
// evaluation is bounded by ExprMemoryBudget. Errors are *ExprError.
func RunExpr(p *vm.Program, inputs map[string]any) (any, error) {
	if inputs == nil {
		inputs = map[string]any{}
	}
	machine := vm.VM{MemoryBudget: ExprMemoryBudget}
	out, err := machine.Run(p, map[string]any{EnvName: inputs})
	if err != nil {
		return nil, toExprError(p.Source().String(), err)
	}
	return out, nil
}

// EvalExpr compiles and runs src; for one-off evaluations (callers that evaluate the same
// source repeatedly should compile once).
func EvalExpr(src string, inputs map[string]any) (any, error) {
	p, err := CompileExpr(src)
	if err != nil {
		return nil, err
	}
	return RunExpr(p, inputs)
}

// EvalSelector evaluates a field that is "a single token or an expression" (router select,
// map over): a single token is resolved as a token, anything else runs as an expression.
func EvalSelector(src string, inputs map[string]any) (any, error) {
	if tok, ok := IsSingleToken(src); ok {
		return Resolve(tok, inputs)
	}
	return EvalExpr(src, inputs)
}

// ExprInputPorts returns the input ports an expression reads through `$in.<port>` or
// `$in["<port>"]`, in order of first appearance, without duplicates. dynamic is true when the
// expression indexes $in with a computed key or uses $in whole, so its ports are not all known.
func ExprInputPorts(src string) (ports []string, dynamic bool, err error) {
	if len(src) > MaxExprLength {
		return nil, false, &ExprError{Message: fmt.Sprintf("expression longer than %d bytes", MaxExprLength), Pos: -1}
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, false, toExprError(src, err)
	}
	c := &portCollector{seen: map[string]bool{}}
	ast.Walk(&tree.Node, c)
	return c.ports, c.whole > c.members, nil
}

type portCollector struct {
	ports   []string
	seen    map[string]bool
	whole   int // references to the $in identifier
	members int // of which are the base of a constant-key member access
}

func (c *portCollector) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		if n.Value == EnvName {
			c.whole++
		}
	case *ast.MemberNode:
		id, ok := n.Node.(*ast.IdentifierNode)
		if !ok || id.Value != EnvName {
			return
		}
		s, ok := n.Property.(*ast.StringNode)
		if !ok {
			return
		}
		c.members++
		if !c.seen[s.Value] {
			c.seen[s.Value] = true
			c.ports = append(c.ports, s.Value)
		}
	}
}

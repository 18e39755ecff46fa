package graph

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestExprEval(t *testing.T) {
	inputs := map[string]any{
		"in": map[string]any{
			"name":  "Ada",
			"kind":  "bug",
			"n":     float64(2),
			"items": []any{map[string]any{"name": "a", "price": 1.5}, map[string]any{"name": "b", "price": 2.5}},
			"null":  nil,
		},
		"ctx": map[string]any{"lang": "en"},
	}
	tests := []struct {
		src  string
		want any
		err  string // substring of the error, when one is expected
	}{
		{src: `{greeting: "Hello, " + $in.in.name}`, want: map[string]any{"greeting": "Hello, Ada"}},
		{src: `$in.in.kind == "bug" ? "eng" : "support"`, want: "eng"},
		{src: `$in.in.n * 2`, want: float64(4)},
		{src: `$in.in.items[1].name`, want: "b"},
		{src: `$in.in.items[-1].name`, want: "b"},
		{src: `$in["ctx"].lang`, want: "en"},
		{src: `$in.ctx["lang"]`, want: "en"},
		{src: `map($in.in.items, .name)`, want: []any{"a", "b"}},
		{src: `sum(map($in.in.items, .price))`, want: float64(4)},
		{src: `$in.in.null`, want: nil},
		{src: `$in.in.missing ?? "default"`, want: "default"},
		{src: `$in.in.missing.deeper ?? "default"`, want: "default"},
		{src: `$in.in?.missing`, want: nil},
		{src: `"name" in $in.in`, want: true},
		{src: `"missing" in $in.in`, want: false},
		{src: `len($in.in.items) > 1 && $in.ctx.lang == "en"`, want: true},
		{src: `$in.in.missing`, err: `field "missing" is absent`},
		{src: `$in.in.missing == nil`, err: `field "missing" is absent`},
		{src: `$in.nope.x`, err: `field "nope" is absent`},
		{src: `$in.in.items[5]`, err: `index out of range`},
		{src: `$in.in.null.x`, err: `value is null`},
		{src: `map($in.in.items, .nope)`, err: `field "nope" is absent`},
		{src: `map(1..2000, map(1..2000, #))`, err: `memory budget`},
		{src: `foo + 1`, err: `unknown name foo`},
		{src: `1 +`, err: `unexpected token`},
	}
	for _, tt := range tests {
		got, err := EvalExpr(tt.src, inputs)
		if tt.err != "" {
			var ee *ExprError
			if !errors.As(err, &ee) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want *ExprError containing %q", tt.src, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.src, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s = %#v, want %#v", tt.src, got, tt.want)
		}
	}
}

func TestExprErrorPosition(t *testing.T) {
	_, err := CompileExpr("1 +\n  * 2")
	var ee *ExprError
	if !errors.As(err, &ee) {
		t.Fatalf("got %v", err)
	}
	if ee.Line != 2 || ee.Pos < 0 {
		t.Fatalf("position line %d pos %d, want line 2", ee.Line, ee.Pos)
	}
	_, err = EvalExpr(`"x" + $in.in.absent`, map[string]any{"in": map[string]any{}})
	if !errors.As(err, &ee) || ee.Line != 1 || ee.Column == 0 {
		t.Fatalf("run-time error without position: %#v", err)
	}
	if _, err := CompileExpr(strings.Repeat("1+", MaxExprLength)); err == nil {
		t.Fatal("oversized expression compiled")
	}
}

func TestExprProgramReuse(t *testing.T) {
	p, err := CompileExpr(`$in.in.x + 1`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		got, err := RunExpr(p, map[string]any{"in": map[string]any{"x": i}})
		if err != nil || got != i+1 {
			t.Fatalf("run %d: %v, %v", i, got, err)
		}
	}
	if _, err := RunExpr(p, nil); err == nil {
		t.Fatal("RunExpr with no inputs read an absent port")
	}
}

func TestEvalSelector(t *testing.T) {
	inputs := map[string]any{"in": map[string]any{"user-kind": "bug", "k": "question"}}
	if v, err := EvalSelector("$in.in.user-kind", inputs); err != nil || v != "bug" {
		t.Fatalf("token selector: %v %v", v, err)
	}
	if v, err := EvalSelector(`$in.in.k == "question" ? "q" : "other"`, inputs); err != nil || v != "q" {
		t.Fatalf("expression selector: %v %v", v, err)
	}
}

func TestExprInputPorts(t *testing.T) {
	tests := []struct {
		src     string
		ports   []string
		dynamic bool
	}{
		{`1 + 2`, nil, false},
		{`$in.in.a + $in.ctx.b + $in.in.c`, []string{"in", "ctx"}, false},
		{`$in["side"].x`, []string{"side"}, false},
		{`$in[$in.in.port]`, []string{"in"}, true},
		{`keys($in)`, nil, true},
		{`map($in.in.items, .name)`, []string{"in"}, false},
	}
	for _, tt := range tests {
		ports, dyn, err := ExprInputPorts(tt.src)
		if err != nil {
			t.Errorf("%s: %v", tt.src, err)
			continue
		}
		if !reflect.DeepEqual(ports, tt.ports) || dyn != tt.dynamic {
			t.Errorf("%s: ports %v dynamic %v, want %v %v", tt.src, ports, dyn, tt.ports, tt.dynamic)
		}
	}
	if _, _, err := ExprInputPorts("(("); err == nil {
		t.Error("syntax error not reported")
	}
}

func FuzzExpr(f *testing.F) {
	for _, s := range []string{
		`{greeting: "Hello, " + $in.in.name}`, `$in.in.kind`, `$in.in.x ?? 1`, `map($in.in.items, .name)`,
		`$in.in?.a.b`, `1..10`, `"a" in $in.in`, `$in[$in.in.k]`, `let x = $in.in; x.name`, `((`,
	} {
		f.Add(s)
	}
	inputs := map[string]any{"in": map[string]any{"name": "Ada", "items": []any{map[string]any{"name": "x"}}, "k": "in"}}
	f.Fuzz(func(t *testing.T, s string) {
		_, _, _ = ExprInputPorts(s)
		p, err := CompileExpr(s)
		if err != nil {
			var ee *ExprError
			if !errors.As(err, &ee) {
				t.Fatalf("compile error of type %T", err)
			}
			return
		}
		_, _ = RunExpr(p, inputs)
	})
}

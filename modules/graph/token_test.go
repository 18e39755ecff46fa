package graph

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestFindTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string // Raw of each token
	}{
		{"", nil},
		{"plain text", nil},
		{"$in.in", []string{"$in.in"}},
		{"Hello, $in.in.name!", []string{"$in.in.name"}},
		{"$in.in.items[0].name and $in.ctx.user-id", []string{"$in.in.items[0].name", "$in.ctx.user-id"}},
		{"$in.in.a.", []string{"$in.in.a"}},
		{"$in.in.a[", []string{"$in.in.a"}},
		{"$in.in.a[x]", []string{"$in.in.a"}},
		{"$in.in.a[12][3]", []string{"$in.in.a[12][3]"}},
		{"$in.", nil},
		{"$in.1port", nil},
		{"$input.x", nil},
		{"a$in.in.x", nil},
		{"$$in.in.x", nil},
		{"($in.in.x)", []string{"$in.in.x"}},
		{"$in.in.x$in.in.y", []string{"$in.in.x"}},
		{"id-$in.in.id", []string{"$in.in.id"}},
		{"$in.in.a[99999999999999999999]", []string{"$in.in.a"}},
		{"héllo $in.in.ü", []string{"$in.in"}},
	}
	for _, tt := range tests {
		var got []string
		for _, tok := range FindTokens(tt.in) {
			got = append(got, tok.Raw)
			if tt.in[tok.Start:tok.End] != tok.Raw {
				t.Errorf("%q: offsets %d..%d do not match %q", tt.in, tok.Start, tok.End, tok.Raw)
			}
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("FindTokens(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTokenParts(t *testing.T) {
	tok, ok := IsSingleToken("$in.in.items[2].first_name")
	if !ok {
		t.Fatal("not a single token")
	}
	want := []PathElem{{Key: "items"}, {Index: 2, IsIndex: true}, {Key: "first_name"}}
	if tok.Port != "in" || !reflect.DeepEqual(tok.Path, want) {
		t.Fatalf("got port %q path %+v", tok.Port, tok.Path)
	}
	for _, s := range []string{" $in.in", "$in.in ", "x $in.in", "$in.in.", "$in", ""} {
		if _, ok := IsSingleToken(s); ok {
			t.Errorf("IsSingleToken(%q) = true", s)
		}
	}
	if _, err := ParseToken("nope"); err == nil {
		t.Error("ParseToken accepted a non-token")
	}
}

func TestRender(t *testing.T) {
	inputs := map[string]any{
		"in": map[string]any{
			"name":  "Ada",
			"n":     float64(3),
			"items": []any{map[string]any{"name": "first"}, "second"},
			"obj":   map[string]any{"a": []any{1.0, true}, "h": "<&>"},
			"null":  nil,
		},
		"other": "side",
		"typed": map[string]string{"k": "v"},
		"list":  []string{"x", "y"},
	}
	tests := []struct {
		tmpl    string
		want    any
		missing string // non-empty: expect a *TokenError with this Missing
	}{
		{"no tokens", "no tokens", ""},
		{"$in.in.name", "Ada", ""},
		{"$in.in.n", float64(3), ""},
		{"$in.in.null", nil, ""},
		{"$in.in.items[0].name", "first", ""},
		{"$in.in.items[1]", "second", ""},
		{"$in.other", "side", ""},
		{"$in.typed.k", "v", ""},
		{"$in.list[1]", "y", ""},
		{"Hello, $in.in.name!", "Hello, Ada!", ""},
		{"n=$in.in.n null=$in.in.null", "n=3 null=null", ""},
		{"obj=$in.in.obj", `obj={"a":[1,true],"h":"<&>"}`, ""},
		{"$in.in.missing", nil, "$in.in.missing"},
		{"x $in.nope.a", nil, "$in.nope"},
		{"$in.in.items[5]", nil, "$in.in.items[5]"},
		{"$in.in.name.first", nil, "$in.in.name.first"},
		{"$in.in.null.x", nil, "$in.in.null.x"},
		{"$in.in.obj[0]", nil, "$in.in.obj[0]"},
		{"$in.typed.zz", nil, "$in.typed.zz"},
	}
	for _, tt := range tests {
		got, err := Render(tt.tmpl, inputs)
		if tt.missing != "" {
			var te *TokenError
			if !errors.As(err, &te) || te.Missing != tt.missing {
				t.Errorf("Render(%q) error = %v, want missing %q", tt.tmpl, err, tt.missing)
			}
			continue
		}
		if err != nil {
			t.Errorf("Render(%q): %v", tt.tmpl, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Render(%q) = %#v, want %#v", tt.tmpl, got, tt.want)
		}
	}
}

func TestRenderStringAndValue(t *testing.T) {
	inputs := map[string]any{"in": map[string]any{"id": 7.0, "q": "go", "tags": []any{"a"}}}
	s, err := RenderString("$in.in.id", inputs)
	if err != nil || s != "7" {
		t.Fatalf("RenderString = %q, %v", s, err)
	}
	body := map[string]any{
		"query":    "$in.in.q",
		"tags":     "$in.in.tags",
		"list":     []any{"id-$in.in.id", 1.0, nil},
		"$in.in.q": "keys are not rendered",
	}
	got, err := RenderValue(body, inputs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"query":    "go",
		"tags":     []any{"a"},
		"list":     []any{"id-7", 1.0, nil},
		"$in.in.q": "keys are not rendered",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RenderValue = %#v", got)
	}
	if body["query"] != "$in.in.q" {
		t.Fatal("RenderValue modified its argument")
	}
	if _, err := RenderValue(map[string]any{"a": []any{"$in.in.zz"}}, inputs); err == nil {
		t.Fatal("RenderValue ignored a missing token")
	}
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"", "$in.in", "Hello, $in.in.name!", "$in.in.items[0].name", "$in.in.items[99]",
		"$in.", "$in.in.a[", "$in.in.a[1", "a$in.in.x", "$in.in.x$in.in.y", "$in.ctx.user-id.x",
		"\xff$in.in.name", strings.Repeat("$in.in.a.", 50),
	} {
		f.Add(s)
	}
	inputs := map[string]any{"in": map[string]any{"name": "Ada", "items": []any{map[string]any{"name": "x"}}, "a": map[string]any{"a": "b"}}}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range FindTokens(s) {
			if tok.Start < 0 || tok.End > len(s) || tok.Start >= tok.End || s[tok.Start:tok.End] != tok.Raw {
				t.Fatalf("bad token offsets %+v in %q", tok, s)
			}
			again, ok := IsSingleToken(tok.Raw)
			if !ok || again.Port != tok.Port || len(again.Path) != len(tok.Path) {
				t.Fatalf("token %q does not re-parse alone", tok.Raw)
			}
		}
		v, err := Render(s, inputs)
		if err != nil {
			var te *TokenError
			if !errors.As(err, &te) {
				t.Fatalf("Render(%q) returned a non-token error %v", s, err)
			}
			return
		}
		if len(FindTokens(s)) == 0 && v != s {
			t.Fatalf("Render changed a token-free string %q to %v", s, v)
		}
	})
}

package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// TokenPrefix starts every input reference in a template.
const TokenPrefix = "$in."

// maxTokenIndex bounds list indexes in tokens, so a token cannot ask for an absurd index.
const maxTokenIndex = 1 << 30

// Token is one `$in.<port>.<path>` reference found in a string.
type Token struct {
	Raw   string     // the token text, e.g. "$in.in.items[0].name"
	Port  string     // the input port, e.g. "in"
	Path  []PathElem // the field path after the port
	Start int        // byte offset of the token in the scanned string
	End   int        // byte offset just after the token
}

// PathElem is one step of a token path: a map key or a list index.
type PathElem struct {
	Key     string
	Index   int
	IsIndex bool
}

func (p PathElem) String() string {
	if p.IsIndex {
		return "[" + strconv.Itoa(p.Index) + "]"
	}
	return "." + p.Key
}

// TokenError reports a token whose port or path element is absent from the inputs.
type TokenError struct {
	Token   Token
	Missing string // the token prefix that could not be read, e.g. "$in.in.user.name"
	Reason  string // why, e.g. "no such key", "index out of range", "not an object"
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("%s: %s is absent (%s)", e.Token.Raw, e.Missing, e.Reason)
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || (c >= '0' && c <= '9') || c == '-'
}

// scanIdent returns the end of the identifier starting at i, or i when there is none.
func scanIdent(s string, i int) int {
	if i >= len(s) || !isIdentStart(s[i]) {
		return i
	}
	j := i + 1
	for j < len(s) && isIdentChar(s[j]) {
		j++
	}
	return j
}

// parseTokenAt parses a token starting at s[i] (which must begin with TokenPrefix).
func parseTokenAt(s string, i int) (Token, bool) {
	if !strings.HasPrefix(s[i:], TokenPrefix) {
		return Token{}, false
	}
	// "$in" glued to a preceding identifier (e.g. "a$in.x") is not a token.
	if i > 0 && (isIdentStart(s[i-1]) || (s[i-1] >= '0' && s[i-1] <= '9') || s[i-1] == '$') {
		return Token{}, false
	}
	p := i + len(TokenPrefix)
	e := scanIdent(s, p)
	if e == p {
		return Token{}, false
	}
	tok := Token{Port: s[p:e], Start: i}
	pos := e
	for pos < len(s) {
		switch s[pos] {
		case '.':
			ke := scanIdent(s, pos+1)
			if ke == pos+1 {
				goto done
			}
			tok.Path = append(tok.Path, PathElem{Key: s[pos+1 : ke]})
			pos = ke
		case '[':
			j := pos + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == pos+1 || j >= len(s) || s[j] != ']' {
				goto done
			}
			n, err := strconv.Atoi(s[pos+1 : j])
			if err != nil || n > maxTokenIndex {
				goto done
			}
			tok.Path = append(tok.Path, PathElem{Index: n, IsIndex: true})
			pos = j + 1
		default:
			goto done
		}
	}
done:
	tok.End = pos
	tok.Raw = s[i:pos]
	return tok, true
}

// FindTokens returns every token in s, in order. Text that merely looks like a token prefix
// ("$in." without a port) is left alone; there is no escape syntax.
func FindTokens(s string) []Token {
	var out []Token
	for i := 0; i < len(s); {
		k := strings.Index(s[i:], TokenPrefix)
		if k < 0 {
			break
		}
		at := i + k
		if tok, ok := parseTokenAt(s, at); ok {
			out = append(out, tok)
			i = tok.End
			continue
		}
		i = at + 1
	}
	return out
}

// IsSingleToken reports whether s, exactly, is one token (no surrounding text or spaces).
func IsSingleToken(s string) (Token, bool) {
	tok, ok := parseTokenAt(s, 0)
	if !ok || tok.End != len(s) {
		return Token{}, false
	}
	return tok, true
}

// ParseToken parses s as exactly one token.
func ParseToken(s string) (Token, error) {
	tok, ok := IsSingleToken(s)
	if !ok {
		return Token{}, fmt.Errorf("%q is not a token of the form $in.<port>.<path>", s)
	}
	return tok, nil
}

// Resolve reads the value a token names from inputs (input port name → value). A JSON null
// that is present resolves to nil; anything absent is a *TokenError.
func Resolve(tok Token, inputs map[string]any) (any, error) {
	cur, ok := inputs[tok.Port]
	if !ok {
		return nil, &TokenError{Token: tok, Missing: TokenPrefix + tok.Port, Reason: "no value on port " + strconv.Quote(tok.Port)}
	}
	prefix := TokenPrefix + tok.Port
	for _, el := range tok.Path {
		prefix += el.String()
		next, reason := step(cur, el)
		if reason != "" {
			return nil, &TokenError{Token: tok, Missing: prefix, Reason: reason}
		}
		cur = next
	}
	return cur, nil
}

// step reads one path element from v; reason is non-empty when the element is absent.
func step(v any, el PathElem) (any, string) {
	if el.IsIndex {
		switch l := v.(type) {
		case []any:
			if el.Index >= len(l) {
				return nil, "index out of range"
			}
			return l[el.Index], ""
		case nil:
			return nil, "not a list"
		}
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
			if el.Index >= rv.Len() {
				return nil, "index out of range"
			}
			return rv.Index(el.Index).Interface(), ""
		}
		return nil, "not a list"
	}
	switch m := v.(type) {
	case map[string]any:
		x, ok := m[el.Key]
		if !ok {
			return nil, "no such key"
		}
		return x, ""
	case nil:
		return nil, "not an object"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String {
		x := rv.MapIndex(reflect.ValueOf(el.Key).Convert(rv.Type().Key()))
		if !x.IsValid() {
			return nil, "no such key"
		}
		return x.Interface(), ""
	}
	return nil, "not an object"
}

// Render evaluates a template: a string that is exactly one token yields the raw value;
// otherwise every token is replaced by its value (strings as-is, anything else as compact JSON,
// a present null as "null"). A token naming something absent is an error.
func Render(s string, inputs map[string]any) (any, error) {
	if tok, ok := IsSingleToken(s); ok {
		return Resolve(tok, inputs)
	}
	toks := FindTokens(s)
	if len(toks) == 0 {
		return s, nil
	}
	var b strings.Builder
	last := 0
	for _, tok := range toks {
		b.WriteString(s[last:tok.Start])
		v, err := Resolve(tok, inputs)
		if err != nil {
			return nil, err
		}
		if err := writeInterpolated(&b, v); err != nil {
			return nil, fmt.Errorf("%s: %w", tok.Raw, err)
		}
		last = tok.End
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

// RenderString is Render for fields that must be text: a single token naming a non-string
// value is rendered as compact JSON.
func RenderString(s string, inputs map[string]any) (string, error) {
	v, err := Render(s, inputs)
	if err != nil {
		return "", err
	}
	if str, ok := v.(string); ok {
		return str, nil
	}
	var b strings.Builder
	if err := writeInterpolated(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeInterpolated(b *strings.Builder, v any) error {
	if s, ok := v.(string); ok {
		b.WriteString(s)
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Write(bytes.TrimRight(buf.Bytes(), "\n"))
	return nil
}

// RenderValue renders every string inside v (maps, lists, nested) as a template and returns a
// new value; v itself is not modified. Map keys are not rendered.
func RenderValue(v any, inputs map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		return Render(x, inputs)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := RenderValue(e, inputs)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := RenderValue(e, inputs)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := Render(e, inputs)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	default:
		return v, nil
	}
}

// templateStrings calls fn for every string inside v (the same walk as RenderValue), with the
// JSON pointer suffix of each string relative to v.
func templateStrings(v any, path string, fn func(path, s string)) {
	switch x := v.(type) {
	case string:
		fn(path, x)
	case map[string]any:
		for k, e := range x {
			templateStrings(e, pointer(path, k), fn)
		}
	case []any:
		for i, e := range x {
			templateStrings(e, pointer(path, i), fn)
		}
	case map[string]string:
		for k, e := range x {
			fn(pointer(path, k), e)
		}
	}
}

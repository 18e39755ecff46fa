package graph

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestFormatNumberRFC8785Vectors(t *testing.T) {
	// RFC 8785 Appendix B.
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		got, err := FormatNumber(math.Float64frombits(tt.bits))
		if err != nil || got != tt.want {
			t.Errorf("%016x: got %q (%v), want %q", tt.bits, got, err, tt.want)
		}
	}
	for _, f := range []float64{1e21, 1e-7, 1e20, 0.1, 123, -1.5} {
		want := map[float64]string{1e21: "1e+21", 1e-7: "1e-7", 1e20: "100000000000000000000", 0.1: "0.1", 123: "123", -1.5: "-1.5"}[f]
		if got, _ := FormatNumber(f); got != want {
			t.Errorf("%v: got %q want %q", f, got, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := FormatNumber(f); err == nil {
			t.Errorf("%v accepted", f)
		}
	}
}

func TestCanonicalize(t *testing.T) {
	tests := []struct{ in, want string }{
		// RFC 8785 §3.2.2 example.
		{`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
		  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
		  "literals": [null, true, false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		// RFC 8785 §3.2.3 sorting example (UTF-16 code unit order).
		{`{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
		  "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}`,
			`{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","😀":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`},
		{`[ "<&>", "\u2028", "\b\f\t", -0, 1.0, 100e-2 ]`, `["<&>","` + "\u2028" + `","\b\f\t",0,1,1]`},
		{`{}`, `{}`},
		{` "x" `, `"x"`},
	}
	for _, tt := range tests {
		got, err := Canonicalize([]byte(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("Canonicalize(%s)\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
	var dup *DuplicateKeyError
	if _, err := Canonicalize([]byte(`{"a":{"b":1,"b":2}}`)); !errors.As(err, &dup) || dup.Path != "/a" || dup.Key != "b" {
		t.Errorf("duplicate key: %v", err)
	}
	for _, bad := range []string{`{"a":1} x`, `1e400`, `{"a":`, ``, strings.Repeat("[", MaxIRDepth+1) + strings.Repeat("]", MaxIRDepth+1)} {
		if _, err := Canonicalize([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

const greeterIR = `{
  "id": "greeter",
  "nodes": [
    {"id": "shape", "kind": "transform", "expr": "{greeting: \"Hello, \" + $in.in.name}"},
    {"id": "out", "kind": "output", "value": "$in.in.greeting"}
  ],
  "edges": [
    {"source": "shape", "target": "out"}
  ]
}`

func TestContentHash(t *testing.T) {
	base, err := ContentHash(json.RawMessage(greeterIR))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+64 || strings.ToLower(base) != base {
		t.Fatalf("bad hash format %q", base)
	}
	same := []string{
		// Shuffled keys, no whitespace.
		`{"edges":[{"target":"out","source":"shape"}],"nodes":[{"kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name}","id":"shape"},{"value":"$in.in.greeting","kind":"output","id":"out"}],"id":"greeter"}`,
		// A name is outside the hash.
		`{"name":"Friendly greeter","id":"greeter","nodes":[{"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name}"},{"id":"out","kind":"output","value":"$in.in.greeting"}],"edges":[{"source":"shape","target":"out"}]}`,
		// Escapes that decode to the same text.
		`{"id":"greet\u0065r","nodes":[{"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name}"},{"id":"out","kind":"output","value":"$in.in.greeting"}],"edges":[{"source":"shape","target":"out"}]}`,
	}
	for _, s := range same {
		h, err := ContentHash(json.RawMessage(s))
		if err != nil || h != base {
			t.Errorf("hash %q (%v) differs from %q for %s", h, err, base, s)
		}
	}
	different := []string{
		strings.Replace(greeterIR, `Hello,`, `Hi,`, 1),
		strings.Replace(greeterIR, `"id": "greeter"`, `"id": "greeter2"`, 1),
		strings.Replace(greeterIR, `"id": "greeter",`, `"id": "greeter", "description": "d",`, 1),
		strings.Replace(greeterIR, `"id": "greeter",`, `"id": "greeter", "metadata": {"a": 1},`, 1),
	}
	for _, s := range different {
		h, err := ContentHash(json.RawMessage(s))
		if err != nil || h == base {
			t.Errorf("hash unchanged (%v) for %s", err, s)
		}
	}
	for _, bad := range []string{`[]`, `"x"`, `{"a":1,"a":1}`, `{`} {
		if _, err := ContentHash(json.RawMessage(bad)); err == nil {
			t.Errorf("ContentHash accepted %s", bad)
		}
	}
}

func TestContentHashShuffledReserialisation(t *testing.T) {
	// Decoding into Go maps and re-encoding reorders keys; the hash must not move.
	var v any
	if err := json.Unmarshal([]byte(greeterIR), &v); err != nil {
		t.Fatal(err)
	}
	re, _ := json.MarshalIndent(v, "", "\t")
	a, _ := ContentHash(json.RawMessage(greeterIR))
	b, err := ContentHash(re)
	if err != nil || a != b {
		t.Fatalf("%s != %s (%v)", a, b, err)
	}
}

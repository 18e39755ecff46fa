package dataplane

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseObjectKeepsBytes(t *testing.T) {
	in := `{ "b" : [1, 2.50,  "<&>"],"model":"x",  "c":{"z":1,"a":null} }`
	o, err := parseObject([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	o.set("model", encodeString("prov/<m>"))
	want := `{"b":[1, 2.50,  "<&>"],"model":"prov/<m>","c":{"z":1,"a":null}}`
	if got := string(o.bytes()); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestParseObjectRefuses(t *testing.T) {
	for _, in := range []string{``, ` `, `[]`, `"s"`, `{`, `{"a":1,}`, `{"a":1}{}`, `{"a":1,"a":2}`, `{"a"}`, `null`} {
		if _, err := parseObject([]byte(in)); err == nil {
			t.Errorf("parseObject(%q) accepted", in)
		}
	}
}

// FuzzParseObject: whatever parseObject accepts re-encodes to the same JSON value, and
// whatever encoding/json refuses (as an object) parseObject refuses too.
func FuzzParseObject(f *testing.F) {
	for _, s := range []string{
		`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`,
		`{"a":1.50e3,"b":"\u00e9\n","c":[true,false,null],"d":{}}`,
		`{"model":"x","model":"y"}`,
		`{"":0}`, `{}`, `[1]`, `{"a":`, "{\"a\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		o, err := parseObject(raw)
		var ref map[string]any
		refErr := json.Unmarshal(raw, &ref)
		if err != nil {
			return // refusing more than encoding/json is fine (duplicates)
		}
		if refErr != nil || ref == nil {
			t.Fatalf("parseObject accepted %q that encoding/json refuses: %v", raw, refErr)
		}
		var back map[string]any
		if err := json.Unmarshal(o.bytes(), &back); err != nil {
			t.Fatalf("re-encoded %q is not JSON: %v (%s)", raw, err, o.bytes())
		}
		if !reflect.DeepEqual(ref, back) {
			t.Fatalf("value changed: %q -> %s", raw, o.bytes())
		}
		if err := o.checkTokens(); err == nil {
			_ = o.capTokens(7)
			if !bytes.HasPrefix(o.bytes(), []byte("{")) {
				t.Fatal("cap broke the object")
			}
		}
	})
}

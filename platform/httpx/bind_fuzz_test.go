package httpx_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/httpx"
)

// FuzzDecodeJSON: whatever DecodeJSON accepts is storable as is (valid UTF-8, no NUL in
// any form), and whatever it refuses is a 400 or 413 with a code, never a 500.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":"b"}`, `{"a":"\u0000"}`, "{\"a\":\"\xff\"}", "{\"\xc0\":1}", `{"a":"\\u0000"}`,
		`{"a":"\ud800"}`, `[1,2]`, `1e400`, `{"a":`, ``, "\xef\xbb\xbf{}", `{"a":{"b":[null]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var v struct {
			A json.RawMessage `json:"a"`
		}
		err := httpx.DecodeJSON(raw, &v, false)
		if err != nil {
			ae := apperr.From(err)
			if ae == nil || ae.Status >= 500 || ae.Code == "" {
				t.Fatalf("refusal is not a client error: %v", err)
			}
			return
		}
		if !utf8.Valid(v.A) || bytes.IndexByte(v.A, 0) >= 0 {
			t.Fatalf("accepted unstorable bytes %q", v.A)
		}
		var s string
		if json.Unmarshal(v.A, &s) == nil && bytes.IndexByte([]byte(s), 0) >= 0 {
			t.Fatalf("accepted a NUL string %q", v.A)
		}
	})
}

package connections

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestRedact(t *testing.T) {
	in := map[string]any{
		"header": "Authorization", "api_key": "k", "Token": "t", "clientSecret": "s", "PASSWORD": "p",
		"nested": map[string]any{"x-auth-token": "n", "server": "s"}, "server": "files",
	}
	out := Redact(in)
	for _, k := range []string{"api_key", "Token", "clientSecret", "PASSWORD"} {
		if out[k] != "***" {
			t.Errorf("%s not redacted: %v", k, out[k])
		}
	}
	if out["header"] != "Authorization" || out["server"] != "files" {
		t.Errorf("non-secret keys changed: %v", out)
	}
	if n := out["nested"].(map[string]any); n["x-auth-token"] != "***" || n["server"] != "s" {
		t.Errorf("nested: %v", n)
	}
	if in["api_key"] != "k" {
		t.Error("Redact modified its input")
	}
}

// FuzzNormalizeConfig: a config from the wire never panics the validator, and what it
// accepts is a fixed point (stored configs validate again to themselves) without any
// secret-like key.
func FuzzNormalizeConfig(f *testing.F) {
	seeds := []struct{ kind, cfg string }{
		{KindHTTPAuth, `{"type":"header"}`},
		{KindHTTPAuth, `{"type":"header","header":"x-api-key","scheme":""}`},
		{KindHTTPAuth, `{"type":"basic","username":"bot"}`},
		{KindHTTPAuth, `{"type":"query","param":"api_key"}`},
		{KindHTTPAuth, `{"type":"header","token":"x"}`},
		{KindMCPServer, `{"server":"github","env":"GITHUB_TOKEN"}`},
		{KindMCPServer, `{"server":"search","header":"X-Key","scheme":"Token"}`},
		{KindMCPServer, `[]`},
		{"other", `{}`},
		{KindHTTPAuth, `{"type":1}`},
		{KindHTTPAuth, `null`},
	}
	for _, s := range seeds {
		f.Add(s.kind, s.cfg)
	}
	f.Fuzz(func(t *testing.T, kind, raw string) {
		cfg, err := normalizeConfig(kind, json.RawMessage(raw))
		if err != nil {
			return
		}
		for k := range cfg {
			if IsSecretLikeKey(k) {
				t.Fatalf("accepted secret-like key %q", k)
			}
		}
		b, _ := json.Marshal(cfg)
		again, err := normalizeConfig(kind, b)
		if err != nil || !reflect.DeepEqual(again, cfg) {
			t.Fatalf("not a fixed point: %s → %v (%v)", raw, again, err)
		}
	})
}

package dataplane_test

import (
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
)

func TestLargeInlineImageAndJSONLimit(t *testing.T) {
	b := setup(t, dataplanetest.Script{}, func(o *dataplane.Options) { o.JSONLimit = 8 << 20 })
	img := strings.Repeat("A", 6<<20) // over the plane's default 4 MiB JSON limit
	body := `{"model":"chat","messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + img + `"}}]}]}`
	r := b.srv.Do("POST", "/v1/chat/completions", body)
	if r.Status != 200 {
		t.Fatalf("6 MiB vision request = %d %s", r.Status, r.Body)
	}
	if got := b.up.Last().Body; !strings.Contains(string(got), img) {
		t.Errorf("the image did not reach the upstream intact")
	}
	b.up.Reset()
	r = b.srv.Do("POST", "/v1/chat/completions", strings.Replace(body, img, img+img, 1))
	if r.Status != 413 || r.ErrorCode() != "payload_too_large" {
		t.Errorf("12 MiB request = %d %s", r.Status, r.Body)
	}
	if len(b.up.Requests()) != 0 {
		t.Errorf("an oversized request reached the upstream")
	}
}

func TestModelIDWithSlash(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	b.models.Put(dataplane.Target{LogicalID: "org/m:7b", BaseURL: b.up.BaseURL(), Model: "x"})
	r := b.srv.Do("GET", "/v1/models/org%2Fm:7b", nil)
	if r.Status != 200 || r.Map(t)["id"] != "org/m:7b" {
		t.Errorf("= %d %s", r.Status, r.Body)
	}
	r = b.srv.Do("POST", "/v1/chat/completions", `{"model":"org/m:7b","messages":[]}`)
	if r.Status != 200 || b.up.Last().JSON["model"] != "x" {
		t.Errorf("chat with a slashed id = %d %s", r.Status, r.Body)
	}
}

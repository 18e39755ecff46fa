package catalog

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/svc-dev/svc/platform/apperr"
)

// FuzzParseQuery: any query string is either a valid query or a 400 invalid_request.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "search=llama&sort=likes&limit=5", "engines=llama.cpp,whisper.cpp", "limit=-1", "size=tiny&modality=chat", "sort=x", "a=b&a=c", "search=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseQuery(v)
		if err != nil {
			if e := apperr.From(err); e == nil || e.Status != http.StatusBadRequest || e.Code != "invalid_request" {
				t.Fatalf("%q: %v", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > maxLimit || sortKeys[q.Sort] == "" || len(q.Search) > maxSearchLen {
			t.Fatalf("%q accepted as %+v", raw, q)
		}
	})
}

// FuzzHubModel: whatever JSON the hub sends, summarizing and grouping do not panic and
// never keep an unsafe file name.
func FuzzHubModel(f *testing.F) {
	f.Add([]byte(`{"id":"a/b","tags":["gguf"],"siblings":[{"rfilename":"x.Q4_K_M.gguf","size":10,"lfs":{"sha256":"zz","size":10}}]}`))
	f.Add([]byte(`{"id":"../x","siblings":[{"rfilename":"../../etc/passwd.gguf"}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m hubModel
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		if sm, ok := summarize(&m); ok && !ValidRepo(sm.ID) {
			t.Fatalf("summary of an invalid repo %q", sm.ID)
		}
		for _, v := range Variants(m.files(), 1<<34) {
			for _, fl := range v.Files {
				if !SafeFileName(fl.Name) || (fl.SHA256 != "" && len(fl.SHA256) != 64) {
					t.Fatalf("file %+v", fl)
				}
			}
		}
	})
}

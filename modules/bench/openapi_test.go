package bench

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/openapi"
	"github.com/svc-dev/svc/platform/testkit"
)

// TestOpenAPIFragment keeps the fragment in step with the routes and its $refs resolvable.
func TestOpenAPIFragment(t *testing.T) {
	svc, err := NewService(dbtest.Open(t, database.SQLite))
	if err != nil {
		t.Fatal(err)
	}
	m := New(svc)
	srv := testkit.New(t, testkit.Options{}, m)
	doc, err := openapi.Build("bench", "test", m.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	missing, err := openapi.Missing(srv.Echo, doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("routes missing from openapi.json: %v", missing)
	}
	var d struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	for _, ref := range strings.Split(string(doc), `"$ref": "#/components/schemas/`)[1:] {
		name := ref[:strings.IndexByte(ref, '"')]
		if _, ok := d.Components.Schemas[name]; !ok {
			t.Errorf("$ref to missing schema %s", name)
		}
	}
}

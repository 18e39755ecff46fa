package dataplane_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
	"github.com/svc-dev/svc/platform/openapi"
)

func TestOpenAPIFragmentCoversRoutes(t *testing.T) {
	m, err := dataplane.New(dataplane.Options{Models: dataplanetest.NewModels()})
	if err != nil {
		t.Fatal(err)
	}
	var frag struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(m.OpenAPI(), &frag); err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	m.Register(e.Group(""))
	for _, r := range e.Routes() {
		p := openapi.PathFromEcho(r.Path)
		if _, ok := frag.Paths[p][strings.ToLower(r.Method)]; !ok {
			t.Errorf("%s %s is not in openapi.json", r.Method, p)
		}
	}
	if _, err := openapi.Build("t", "v", m.OpenAPI()); err != nil {
		t.Error(err)
	}
}

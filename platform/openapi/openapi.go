// Package openapi assembles a plane's OpenAPI 3 document from the fragments its modules
// contribute, and checks it against the routes actually registered.
package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"
)

// Build merges fragments ({"paths":{…},"components":{"schemas":{…}}}) into one document.
func Build(title, version string, fragments ...[]byte) ([]byte, error) {
	paths := map[string]map[string]any{}
	schemas := map[string]any{}
	for i, f := range fragments {
		if len(f) == 0 {
			continue
		}
		var frag struct {
			Paths      map[string]map[string]any `json:"paths"`
			Components struct {
				Schemas map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(f, &frag); err != nil {
			return nil, fmt.Errorf("openapi fragment %d: %w", i, err)
		}
		for p, ops := range frag.Paths {
			if paths[p] == nil {
				paths[p] = map[string]any{}
			}
			for m, op := range ops {
				paths[p][m] = op
			}
		}
		for k, v := range frag.Components.Schemas {
			schemas[k] = v
		}
	}
	schemas["Error"] = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"error": map[string]any{
				"type":     "object",
				"required": []string{"code", "message"},
				"properties": map[string]any{
					"code":    map[string]any{"type": "string"},
					"message": map[string]any{"type": "string"},
					"details": map[string]any{},
				},
			},
		},
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": title, "version": version},
		"paths":   paths,
		"components": map[string]any{
			"schemas": schemas,
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

// Handler serves the document.
func Handler(doc []byte) echo.HandlerFunc {
	return func(c echo.Context) error {
		return c.JSONBlob(http.StatusOK, doc)
	}
}

var echoParam = regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)

// PathFromEcho turns /agents/:id into /agents/{id}.
func PathFromEcho(p string) string { return echoParam.ReplaceAllString(p, "{$1}") }

// Missing lists "METHOD /path" of registered routes absent from doc.
func Missing(e *echo.Echo, doc []byte) ([]string, error) {
	var d struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound || strings.HasPrefix(r.Method, "echo_") || r.Path == "" {
			continue
		}
		p := PathFromEcho(r.Path)
		if strings.HasSuffix(p, "/*") {
			continue
		}
		if _, ok := d.Paths[p][strings.ToLower(r.Method)]; !ok {
			out = append(out, r.Method+" "+p)
		}
	}
	sort.Strings(out)
	return out, nil
}

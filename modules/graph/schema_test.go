package graph

import (
	"encoding/json"
	"testing"
)

func TestSchemaCompilesAndIsJSON(t *testing.T) {
	if _, err := compiledSchema(); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(SchemaJSON(), &v); err != nil {
		t.Fatal(err)
	}
	if v["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Fatalf("unexpected $schema %v", v["$schema"])
	}
	// Every kind in Kinds has a definition, and the node enum lists exactly Kinds.
	defs := v["$defs"].(map[string]any)
	for _, k := range Kinds {
		if _, ok := defs[k+"Node"]; !ok {
			t.Errorf("schema lacks a definition for kind %q", k)
		}
	}
	enum := defs["node"].(map[string]any)["properties"].(map[string]any)["kind"].(map[string]any)["enum"].([]any)
	if len(enum) != len(Kinds) {
		t.Errorf("kind enum has %d entries, Kinds has %d", len(enum), len(Kinds))
	}
}

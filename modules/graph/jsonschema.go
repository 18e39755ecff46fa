package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// userSchemaURL is the location user-supplied schemas are compiled under.
const userSchemaURL = "urn:svc:user-schema"

// noRemoteLoader refuses every $ref outside the document: a user schema must never make the
// service read files or fetch URLs.
type noRemoteLoader struct{}

func (noRemoteLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed", url)
}

// CompileJSONSchema compiles a JSON Schema supplied in an IR (guardrail `jsonSchema` checks,
// llm `jsonSchema`). External references are refused; the default draft is 2020-12.
func CompileJSONSchema(schema map[string]any) (*jsonschema.Schema, error) {
	if schema == nil {
		return nil, errors.New("schema is empty")
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noRemoteLoader{})
	if err := c.AddResource(userSchemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(userSchemaURL)
}

// ToSchemaInstance converts a decoded Go value (float64 numbers) into the form the
// jsonschema package validates (json.Number), by a JSON round trip.
func ToSchemaInstance(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

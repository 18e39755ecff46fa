package graph

import (
	"bytes"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed schema.json
var schemaJSON []byte

// SchemaURL is the $id of the IR schema.
const SchemaURL = "https://svc.dev/schemas/ir.json"

// SchemaJSON returns the JSON Schema (draft 2020-12) of the IR, as served at GET /schemas/ir.json.
func SchemaJSON() []byte { return bytes.Clone(schemaJSON) }

// irSchema is the compiled IR schema plus the printer used to word its errors.
type irSchema struct {
	schema  *jsonschema.Schema
	printer *message.Printer
}

// compiledSchema compiles the embedded schema once; the result is read-only afterwards.
var compiledSchema = sync.OnceValues(func() (*irSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("graph: embedded schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaURL, doc); err != nil {
		return nil, fmt.Errorf("graph: embedded schema: %w", err)
	}
	s, err := c.Compile(SchemaURL)
	if err != nil {
		return nil, fmt.Errorf("graph: embedded schema: %w", err)
	}
	return &irSchema{schema: s, printer: message.NewPrinter(language.English)}, nil
})

// validate checks an instance decoded with jsonschema.UnmarshalJSON and returns one Problem per
// failing leaf keyword (the deepest, most specific errors).
func (s *irSchema) validate(instance any) []Problem {
	err := s.schema.Validate(instance)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []Problem{{Path: "", Message: err.Error()}}
	}
	var out []Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		path := jsonPointer(e.InstanceLocation)
		switch e.ErrorKind.(type) {
		case *kind.Not:
			// The schema uses "not" only for the subgraph pin.
			out = append(out, Problem{Path: path, Message: "set at most one of 'version' and 'contentHash'"})
			return
		case *kind.AnyOf:
			// anyOf is only used for "one of these fields is required"; say so once.
			var names []string
			for _, c := range e.Causes {
				if r, ok := c.ErrorKind.(*kind.Required); ok {
					names = append(names, "'"+strings.Join(r.Missing, "', '")+"'")
				}
			}
			if len(names) == len(e.Causes) {
				out = append(out, Problem{Path: path, Message: "needs one of " + strings.Join(names, " or ")})
				return
			}
		}
		if len(e.Causes) == 0 {
			out = append(out, Problem{Path: path, Message: e.ErrorKind.LocalizedString(s.printer)})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// jsonPointer joins reference tokens into an RFC 6901 JSON pointer.
func jsonPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

// pointer builds a JSON pointer from mixed string / int segments.
func pointer(base string, segs ...any) string {
	var b strings.Builder
	b.WriteString(base)
	for _, s := range segs {
		b.WriteByte('/')
		switch v := s.(type) {
		case int:
			b.WriteString(strconv.Itoa(v))
		case string:
			v = strings.ReplaceAll(v, "~", "~0")
			b.WriteString(strings.ReplaceAll(v, "/", "~1"))
		default:
			fmt.Fprint(&b, v)
		}
	}
	return b.String()
}

package observability

import (
	"encoding/json"
	"strconv"
	"time"
)

// PortMeta describes one captured port without its content.
type PortMeta struct {
	Type  string `json:"type"`  // object, array, string, number, boolean or null
	Bytes int    `json:"bytes"` // size of its compact JSON encoding before redaction (escapes not counted)
}

// ioRows applies the run's policy to buffered node payloads. Redaction happens here, before
// anything is encoded for the database, so a redacted value is never stored.
func (r *Recorder) ioRows(runID string, p Policy, ios []capturedIO) []ioRow {
	if p.Capture == CaptureOff || len(ios) == 0 {
		return nil
	}
	out := make([]ioRow, 0, len(ios))
	for _, c := range ios {
		row := ioRow{RunID: runID, NodeID: c.nodeID, Capture: p.Capture, InputMeta: metaOf(c.input), OutputMeta: metaOf(c.output),
			CapturedAt: c.at, restored: c.restored}
		if p.Capture == CaptureFull {
			in, errIn := encodePorts(p, c.input)
			outp, errOut := encodePorts(p, c.output)
			switch {
			case errIn != nil || errOut != nil:
				row.Capture = captureUnencodable
			case len(in) > r.opts.MaxIOBytes || len(outp) > r.opts.MaxIOBytes:
				row.Capture = captureTooLarge
			default:
				row.Input, row.Output = in2ptr(in), in2ptr(outp)
				if p.RetentionSeconds != nil {
					exp := c.at.Add(time.Duration(*p.RetentionSeconds) * time.Second)
					row.ExpiresAt = &exp
				}
			}
		}
		out = append(out, row)
	}
	return out
}

// encodePorts redacts a port map (the root of a redact path is the port name: "in.password",
// "*.api_key") and encodes it.
func encodePorts(p Policy, ports map[string]any) ([]byte, error) {
	if ports == nil {
		ports = map[string]any{}
	}
	b, err := json.Marshal(ports)
	if err != nil || p.Redact == nil {
		return b, err
	}
	// Redaction walks decoded JSON (maps, lists, strings); a round trip turns every Go shape a
	// node produced ([]string, structs, …) into those, so no string escapes the rules.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return json.Marshal(p.Redact(v))
}

func in2ptr(b []byte) *string {
	s := string(b)
	return &s
}

func metaOf(ports map[string]any) string {
	meta := make(map[string]PortMeta, len(ports))
	for k, v := range ports {
		meta[k] = PortMeta{Type: jsonType(v), Bytes: jsonSize(v)}
	}
	b, _ := json.Marshal(meta) // strings and ints only
	return string(b)
}

// jsonSize is the size of v's compact JSON encoding, computed without encoding it (the writer
// does this for every node of every run). Strings count their bytes plus quotes, without the
// escapes the encoder would add; shapes other than decoded JSON are encoded to measure them.
func jsonSize(v any) int {
	switch x := v.(type) {
	case nil:
		return 4
	case bool:
		if x {
			return 4
		}
		return 5
	case string:
		return len(x) + 2
	case float64:
		return len(strconv.FormatFloat(x, 'g', -1, 64))
	case int:
		return len(strconv.Itoa(x))
	case map[string]any:
		n := 2
		if len(x) > 0 {
			n += len(x) - 1 // commas
		}
		for k, e := range x {
			n += len(k) + 3 + jsonSize(e) // "k":
		}
		return n
	case []any:
		n := 2
		if len(x) > 0 {
			n += len(x) - 1
		}
		for _, e := range x {
			n += jsonSize(e)
		}
		return n
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64, float32, int, int64, int32, uint, uint64, json.Number:
		return "number"
	}
	// Other Go shapes still encode as one of the JSON types.
	b, err := json.Marshal(v)
	if err != nil || len(b) == 0 {
		return "unknown"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

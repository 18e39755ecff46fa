package dataplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/svc-dev/svc/platform/apperr"
)

// object is a JSON object whose top-level members keep their order and their exact bytes,
// so that a request forwarded upstream differs from what the client sent only in the
// members we rewrite (model, max_tokens).
type object struct {
	members []member
}

type member struct {
	key   string
	value json.RawMessage
}

// parseObject reads a JSON object. Duplicate top-level keys are refused: parsers disagree
// on which one wins, and the upstream must see the model we checked.
func parseObject(raw []byte) (*object, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, apperr.Invalid("request body is required")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, apperr.Invalid("malformed JSON: %s", jsonErr(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, apperr.Invalid("request body must be a JSON object")
	}
	o := &object{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, apperr.Invalid("malformed JSON: %s", jsonErr(err))
		}
		key, ok := tok.(string)
		if !ok {
			return nil, apperr.Invalid("malformed JSON: object key expected")
		}
		if seen[key] {
			return nil, apperr.Invalid("field %q appears more than once", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, apperr.Invalid("malformed JSON in field %q: %s", key, jsonErr(err))
		}
		o.members = append(o.members, member{key: key, value: v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, apperr.Invalid("malformed JSON: %s", jsonErr(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, apperr.Invalid("malformed JSON: unexpected data after the JSON object")
	}
	return o, nil
}

func jsonErr(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// get returns the raw value of key, or nil.
func (o *object) get(key string) json.RawMessage {
	for _, m := range o.members {
		if m.key == key {
			return m.value
		}
	}
	return nil
}

// set replaces key's value in place, or appends it.
func (o *object) set(key string, v json.RawMessage) {
	for i, m := range o.members {
		if m.key == key {
			o.members[i].value = v
			return
		}
	}
	o.members = append(o.members, member{key: key, value: v})
}

// has reports whether key is present (with any value, null included).
func (o *object) has(key string) bool { return o.get(key) != nil }

// bytes encodes the object: members in order, values byte for byte.
func (o *object) bytes() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o.members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(encodeString(m.key))
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// encodeString encodes s as a JSON string without HTML escaping.
func encodeString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimRight(b.Bytes(), "\n")
}

// stringField reads key as a non-empty JSON string.
func (o *object) stringField(key string) (string, error) {
	raw := o.get(key)
	if raw == nil || string(raw) == "null" {
		return "", apperr.Invalid("field %q is required", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", apperr.Invalid("field %q must be a string", key)
	}
	if s == "" {
		return "", apperr.Invalid("field %q must not be empty", key)
	}
	return s, nil
}

// checkTokens refuses a max_tokens / max_completion_tokens that is not an integer (or null).
func (o *object) checkTokens() error {
	for _, key := range []string{"max_tokens", "max_completion_tokens"} {
		raw := o.get(key)
		if raw == nil || string(raw) == "null" {
			continue
		}
		if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil {
			return apperr.Invalid("field %q must be an integer", key)
		}
	}
	return nil
}

// capTokens lowers every present max_tokens / max_completion_tokens above limit to limit,
// and sets max_tokens to limit when neither is present, so the cap holds either way.
func (o *object) capTokens(limit int) error {
	if limit <= 0 {
		return nil
	}
	present := false
	for _, key := range []string{"max_tokens", "max_completion_tokens"} {
		raw := o.get(key)
		if raw == nil || string(raw) == "null" {
			continue
		}
		present = true
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return apperr.Invalid("field %q must be an integer", key)
		}
		if n > int64(limit) {
			o.set(key, json.RawMessage(strconv.Itoa(limit)))
		}
	}
	if !present {
		// A null max_tokens counts as absent and is replaced by the cap.
		o.set("max_tokens", json.RawMessage(strconv.Itoa(limit)))
	}
	return nil
}

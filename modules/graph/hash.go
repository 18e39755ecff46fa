package graph

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// HashPrefix starts every content hash.
const HashPrefix = "sha256:"

// HashExcludedField is the one top-level IR field left out of the content hash: the display
// name. Description and metadata are content (they can steer tools and UIs) and are hashed.
const HashExcludedField = "name"

// ContentHash returns "sha256:" + lowercase hex SHA-256 of the RFC 8785 canonical JSON of the IR,
// with the top-level HashExcludedField removed. The IR must be a JSON object without
// duplicate keys.
func ContentHash(raw json.RawMessage) (string, error) {
	v, err := parseStrict(raw, MaxIRDepth)
	if err != nil {
		return "", err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", errors.New("graph: the IR must be a JSON object")
	}
	trimmed := make(map[string]any, len(obj))
	for k, e := range obj {
		if k != HashExcludedField {
			trimmed[k] = e
		}
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, trimmed); err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return HashPrefix + hex.EncodeToString(sum[:]), nil
}

// Canonicalize returns the RFC 8785 (JCS) canonical form of a JSON text.
func Canonicalize(raw []byte) ([]byte, error) {
	v, err := parseStrict(raw, MaxIRDepth)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parseStrict decodes one JSON value (numbers kept as json.Number) and rejects duplicate object
// keys, trailing data and nesting deeper than maxDepth.
func parseStrict(raw []byte, maxDepth int) (any, error) {
	if err := checkDepth(raw, maxDepth); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, "")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("graph: trailing data after the JSON value")
	}
	return v, nil
}

// DuplicateKeyError reports an object key that appears twice (at Path, a JSON pointer).
type DuplicateKeyError struct {
	Path string
	Key  string
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("duplicate key %q in the object at %q", e.Key, e.Path)
}

func decodeValue(dec *json.Decoder, path string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("graph: object key is not a string")
				}
				if _, dup := obj[k]; dup {
					return nil, &DuplicateKeyError{Path: path, Key: k}
				}
				v, err := decodeValue(dec, pointer(path, k))
				if err != nil {
					return nil, err
				}
				obj[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for i := 0; dec.More(); i++ {
				v, err := decodeValue(dec, pointer(path, i))
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("graph: unexpected %v", t)
	default:
		return tok, nil
	}
}

// checkDepth rejects JSON nested deeper than max before anything recursive touches it.
func checkDepth(raw []byte, max int) error {
	depth := 0
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > max {
				return fmt.Errorf("graph: JSON nested deeper than %d levels", max)
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return fmt.Errorf("graph: number %s is not representable as an IEEE 754 double", x)
		}
		s, err := FormatNumber(f)
		if err != nil {
			return err
		}
		buf.WriteString(s)
	case float64:
		s, err := FormatNumber(x)
		if err != nil {
			return err
		}
		buf.WriteString(s)
	case string:
		writeCanonicalString(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeCanonicalString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("graph: cannot canonicalize %T", v)
	}
	return nil
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 §3.2.3 requires.
func compareUTF16(a, b string) int {
	ua := utf16.Encode([]rune(a))
	ub := utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

// writeCanonicalString escapes per RFC 8785 §3.2.2.2: the two-character escapes for \b \t \n
// \f \r \" \\, \u00xx (lowercase hex) for other control characters, everything else verbatim.
func writeCanonicalString(buf *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	buf.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				buf.WriteString(`\"`)
			case '\\':
				buf.WriteString(`\\`)
			case '\b':
				buf.WriteString(`\b`)
			case '\t':
				buf.WriteString(`\t`)
			case '\n':
				buf.WriteString(`\n`)
			case '\f':
				buf.WriteString(`\f`)
			case '\r':
				buf.WriteString(`\r`)
			default:
				if c < 0x20 {
					buf.WriteString(`\u00`)
					buf.WriteByte(hexDigits[c>>4])
					buf.WriteByte(hexDigits[c&0xf])
				} else {
					buf.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		buf.WriteRune(r) // invalid UTF-8 becomes U+FFFD, as encoding/json does on input
		i += size
	}
	buf.WriteByte('"')
}

// FormatNumber serialises a double the way ECMAScript's Number.prototype.toString does
// (RFC 8785 §3.2.2.3). NaN and infinities are not JSON and are rejected.
func FormatNumber(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", errors.New("graph: NaN and Infinity are not valid JSON numbers")
	}
	if f == 0 {
		return "0", nil // covers -0 too
	}
	sign := ""
	if f < 0 {
		sign = "-"
		f = -f
	}
	// The shortest round-trip digit count, then those digits correctly rounded: when several
	// shortest strings round-trip, ECMAScript wants the one closest to the value, which Go's
	// shortest mode does not promise (RFC 8785 vector 1.0000000000000002e+23).
	shortest := strconv.FormatFloat(f, 'e', -1, 64)
	mant, _, _ := strings.Cut(shortest, "e")
	k := len(mant)
	if strings.Contains(mant, ".") {
		k--
	}
	e := strconv.FormatFloat(f, 'e', k-1, 64)
	mant, expPart, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, err := strconv.Atoi(expPart)
	if err != nil {
		return "", err
	}
	n := exp + 1 // the decimal point sits after n digits
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		esign := "+"
		if n-1 < 0 {
			esign = "-"
		}
		ev := n - 1
		if ev < 0 {
			ev = -ev
		}
		if k == 1 {
			out = digits + "e" + esign + strconv.Itoa(ev)
		} else {
			out = digits[:1] + "." + digits[1:] + "e" + esign + strconv.Itoa(ev)
		}
	}
	return sign + out, nil
}

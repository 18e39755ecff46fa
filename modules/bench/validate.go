package bench

import (
	"bytes"
	"encoding/json"
	"regexp"
	"unicode"
	"unicode/utf8"
)

// Bounds of stored values. Together with the body limit they keep one request from storing
// an unbounded amount of data or building an unbounded SQL statement.
const (
	maxRefLength         = 200 // logical_id, agent_id
	maxNameLength        = 200 // suite and preset display text
	maxDescriptionLength = 4000
	maxNotesLength       = 8000
	maxMetrics           = 256
	maxMetricNameLength  = 128
	maxLabels            = 64
	maxLabelValueLength  = 512
	maxCases             = 10000
	maxTags              = 32
	maxTagLength         = 64
)

// identPattern is the form of preset names, suite ids and case ids: they appear in URL paths.
var identPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// labelKeyPattern is the form of label keys.
var labelKeyPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./-]{0,63}$`)

// resultIDPattern is the only form of result id the service mints.
var resultIDPattern = regexp.MustCompile(`^` + resultIDPrefix + `[0-9a-f]{32}$`)

// plainText reports whether s is valid UTF-8 of at most max runes with no control characters.
// PostgreSQL refuses NUL and invalid UTF-8 in text columns and queries, so anything a client
// sends passes through here (or a stricter pattern) before it reaches the database.
func plainText(s string, max int) bool {
	return validText(s, max, false)
}

// multilineText is plainText that also allows tab, newline and carriage return.
func multilineText(s string, max int) bool {
	return validText(s, max, true)
}

func validText(s string, max int, multiline bool) bool {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > max {
		return false
	}
	for _, r := range s {
		if multiline && (r == '\n' || r == '\t' || r == '\r') {
			continue
		}
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// isNull reports an absent or JSON-null raw value.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// compactJSON returns raw compacted, refusing invalid UTF-8 (which encoding/json passes
// through untouched inside a RawMessage).
func compactJSON(field string, raw json.RawMessage) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", invalid(field, "is not valid JSON")
	}
	if !utf8.Valid(buf.Bytes()) {
		return "", invalid(field, "contains invalid UTF-8")
	}
	return buf.String(), nil
}

// compactObject is compactJSON for a value that must be a JSON object.
func compactObject(field string, raw json.RawMessage) (string, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return "", invalid(field, "must be a JSON object")
	}
	return compactJSON(field, t)
}

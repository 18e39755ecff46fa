package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/apperr"
)

// BindJSON decodes the request body into v strictly: unknown fields, trailing data, wrong
// types and malformed JSON give 400 invalid_request saying what is wrong; a body over the
// limit gives 413 payload_too_large.
func BindJSON(c echo.Context, v any) error {
	return decode(c.Request(), v, true)
}

// BindJSONLenient is BindJSON without the unknown-field check (pass-through APIs).
func BindJSONLenient(c echo.Context, v any) error {
	return decode(c.Request(), v, false)
}

// ReadBody reads the whole (limited) body.
func ReadBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return nil, ToAppError(err)
	}
	return b, nil
}

func decode(r *http.Request, v any, strict bool) error {
	if r.Body == nil {
		return apperr.Invalid("request body is required")
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return ToAppError(err)
	}
	return DecodeJSON(raw, v, strict)
}

// DecodeJSON decodes raw into v with the same error mapping as BindJSON.
func DecodeJSON(raw []byte, v any, strict bool) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return apperr.Invalid("request body is required")
	}
	if hasNULEscape(raw) {
		// PostgreSQL text and jsonb refuse NUL; refuse it at the door on every dialect.
		return apperr.Invalid("NUL characters (\\u0000) are not supported in request bodies")
	}
	if !utf8.Valid(raw) {
		// JSON is UTF-8 (RFC 8259). encoding/json would keep the bytes inside a
		// json.RawMessage, and PostgreSQL refuses them in text and jsonb columns (a 500).
		return apperr.Invalid("request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return apperr.Invalid("%s", describeJSONError(err))
	}
	if dec.More() {
		return apperr.Invalid("malformed JSON: unexpected data after the JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apperr.Invalid("malformed JSON: unexpected data after the JSON value")
	}
	return nil
}

func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return fmt.Sprintf("request body must be a JSON %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("field %q must be %s, not %s", field, jsonKind(te.Type.Kind().String()), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "malformed JSON: unexpected end of input"
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return "invalid JSON: " + msg
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "of another type"
}

// Page is a validated limit/before pair for list endpoints.
type Page struct {
	Limit  int
	Before string
}

// ParsePage reads `limit` (1–200, default 50) and `before` from the query.
func ParsePage(c echo.Context) (Page, error) {
	p := Page{Limit: 50, Before: c.QueryParam("before")}
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 200 {
			return p, apperr.Invalid("limit must be an integer from 1 to 200")
		}
		p.Limit = n
	}
	return p, nil
}

// hasNULEscape reports a JSON \u0000 escape (any hex case) or a raw NUL byte.
func hasNULEscape(raw []byte) bool {
	if bytes.IndexByte(raw, 0) >= 0 {
		return true
	}
	for i := 0; i+6 <= len(raw); i++ {
		if raw[i] == '\\' && (raw[i+1] == 'u' || raw[i+1] == 'U') && raw[i+2] == '0' && raw[i+3] == '0' && raw[i+4] == '0' && raw[i+5] == '0' {
			// An escaped backslash before it ("\\\\u0000") is text, not NUL.
			bs := 0
			for j := i - 1; j >= 0 && raw[j] == '\\'; j-- {
				bs++
			}
			if bs%2 == 0 {
				return true
			}
		}
	}
	return false
}

// PageHandler answers a list endpoint: it reads `limit` and `before` (ParsePage) and writes
// the page fn returns as JSON.
func PageHandler[P any](fn func(ctx context.Context, limit int, before string) (P, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := ParsePage(c)
		if err != nil {
			return err
		}
		out, err := fn(c.Request().Context(), p.Limit, p.Before)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
}

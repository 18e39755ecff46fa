package database

import (
	"encoding/base64"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Cursor is an opaque keyset position (created_at, id) for newest-first listings.
type Cursor struct {
	At time.Time
	ID string
}

// Encode returns the opaque form sent to clients.
func (c Cursor) Encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.At.UTC().Format(time.RFC3339Nano) + "|" + c.ID))
}

// ErrBadCursor is returned for a cursor the service did not mint.
var ErrBadCursor = errors.New("malformed cursor")

// DecodeCursor parses a cursor made by Encode.
func DecodeCursor(s string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, ErrBadCursor
	}
	at, id, ok := strings.Cut(string(b), "|")
	if !ok || id == "" || len(id) > 256 || !utf8.ValidString(id) || strings.IndexFunc(id, unicode.IsControl) >= 0 {
		// PostgreSQL refuses NUL and invalid UTF-8 in text parameters: reject them here so
		// a crafted cursor is a 400, never a 500.
		return Cursor{}, ErrBadCursor
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return Cursor{}, ErrBadCursor
	}
	return Cursor{At: t, ID: id}, nil
}

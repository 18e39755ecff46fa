package database

import (
	"encoding/base64"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"
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

// Keyset applies newest-first keyset paging on (column, id) to q: it orders, limits to
// limit+1 rows (one extra to know whether a next page exists) and, when before is set,
// starts after that cursor. A cursor the service did not mint gives ErrBadCursor.
func Keyset(q *gorm.DB, column string, limit int, before string) (*gorm.DB, error) {
	q = q.Order(column + " DESC, id DESC").Limit(limit + 1)
	if before == "" {
		return q, nil
	}
	c, err := DecodeCursor(before)
	if err != nil {
		return nil, err
	}
	return q.Where("("+column+" < ? OR ("+column+" = ? AND id < ?))", c.At, c.At, c.ID), nil
}

// NextPage trims rows fetched with Keyset to limit and returns the cursor of the next page
// ("" on the last page); at returns a row's (column, id) position.
func NextPage[T any](rows []T, limit int, at func(T) Cursor) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, at(rows[len(rows)-1]).Encode()
}

package bench

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/svc-dev/svc/platform/database"
)

// Service is the bench store: results, presets and suites. It holds no HTTP knowledge.
type Service struct {
	db *database.DB
}

// NewService builds the service on an opened, migrated database.
func NewService(db *database.DB) (*Service, error) {
	if db == nil {
		return nil, errors.New("bench: nil database")
	}
	return &Service{db: db}, nil
}

const (
	resultIDPrefix = "bres_"
	suiteIDPrefix  = "bsuite_"
)

func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return prefix + hex.EncodeToString(b[:])
}

// decodeCursor parses a before cursor. The id inside comes from the client, so it is held to
// the same text rules as any other input before it reaches a query.
func decodeCursor(before string) (*database.Cursor, error) {
	if before == "" {
		return nil, nil
	}
	c, err := database.DecodeCursor(before)
	if err != nil || !plainText(c.ID, 256) {
		return nil, invalid("before", "is not a cursor from a previous page")
	}
	return &c, nil
}

// now is the creation time of a row, at the microsecond precision PostgreSQL keeps, so the
// created_at of a POST answer equals the one later reads return (and cursors are exact).
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

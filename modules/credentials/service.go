// Package credentials is the inference plane's local credential store: write-only named
// values, encrypted at rest, that credentialRef secret://NAME resolves against (the store
// first, then the process environment variable NAME).
package credentials

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/secrets"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// RefScheme prefixes a credential reference: secret://NAME.
const RefScheme = "secret://"

// MaxValueBytes bounds a stored value; API keys and tokens are far smaller.
const MaxValueBytes = 16 << 10

// namePattern is an environment-variable-style name, because a ref falls back to the
// environment variable of the same name.
var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// ValidName reports whether name is a valid credential name.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// ParseRef returns NAME of "secret://NAME", or ErrInvalidRef.
func ParseRef(ref string) (string, error) {
	name, ok := strings.CutPrefix(ref, RefScheme)
	if !ok || !ValidName(name) {
		return "", ErrInvalidRef.Msg("credentialRef must look like secret://NAME where NAME is letters, digits and underscores (not starting with a digit), up to 128 characters")
	}
	return name, nil
}

// Credential is one stored credential as listed: the value is never returned.
type Credential struct {
	Name     string `json:"name"`
	HasValue bool   `json:"hasValue"`
}

type row struct {
	Name       string `gorm:"primaryKey"`
	Ciphertext string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

func (row) TableName() string { return "inference_credentials" }

// Service stores and resolves credentials.
type Service struct {
	db     *database.DB
	keys   *secrets.Keyring
	getenv func(string) string
}

// New builds the service. getenv reads the process environment for the fallback of
// ResolveRef (os.Getenv in production; tests pass their own).
func New(db *database.DB, keys *secrets.Keyring, getenv func(string) string) *Service {
	if db == nil || keys == nil || getenv == nil {
		panic("credentials.New: nil dependency")
	}
	return &Service{db: db, keys: keys, getenv: getenv}
}

func aad(name string) []byte { return []byte("credential:" + name) }

// List returns every stored name; hasValue is false when the stored value was sealed with
// a key that is no longer configured (e.g. an ephemeral key from a previous process).
func (s *Service) List(ctx context.Context) ([]Credential, error) {
	var rows []row
	if err := s.db.WithContext(ctx).Order("name").Find(&rows).Error; err != nil {
		return nil, err
	}
	ids := s.keys.IDs()
	out := make([]Credential, 0, len(rows))
	for _, r := range rows {
		id, err := secrets.KeyID(r.Ciphertext)
		out = append(out, Credential{Name: r.Name, HasValue: err == nil && slices.Contains(ids, id)})
	}
	return out, nil
}

// Set stores (or replaces) the value of name, encrypted; created reports a new name.
func (s *Service) Set(ctx context.Context, name, value string) (created bool, err error) {
	if !ValidName(name) {
		return false, ErrInvalidName.Msg("credential name must be letters, digits and underscores, not starting with a digit, up to 128 characters")
	}
	if value == "" {
		return false, ErrInvalidValue.Msg("value must be a non-empty string")
	}
	if len(value) > MaxValueBytes {
		return false, ErrInvalidValue.Msg("value is longer than %d bytes", MaxValueBytes)
	}
	ct, err := s.keys.Encrypt([]byte(value), aad(name))
	if err != nil {
		return false, err
	}
	now := time.Now().UTC()
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&row{}).Where("name = ?", name).Count(&n).Error; err != nil {
			return err
		}
		created = n == 0
		return tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "name"}},
			DoUpdates: clause.AssignmentColumns([]string{"ciphertext", "updated_at"}),
		}).Create(&row{Name: name, Ciphertext: ct, CreatedAt: now, UpdatedAt: now}).Error
	})
	return created, err
}

// Delete removes name; ErrNotFound when it is not stored.
func (s *Service) Delete(ctx context.Context, name string) error {
	if !ValidName(name) {
		return ErrInvalidName.Msg("credential name must be letters, digits and underscores, not starting with a digit, up to 128 characters")
	}
	res := s.db.WithContext(ctx).Where("name = ?", name).Delete(&row{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrNotFound.Msg("no credential named %s", name)
	}
	return nil
}

// ResolveRef resolves "secret://NAME": the local store first, then the process environment
// variable NAME. Anything unresolvable is a 502 credential_error naming the ref; the value
// never appears in an error.
func (s *Service) ResolveRef(ctx context.Context, ref string) (string, error) {
	name, err := ParseRef(ref)
	if err != nil {
		// Not echoed: a malformed ref may be a pasted key.
		return "", ErrCredential.Msg("credentialRef is not of the form secret://NAME")
	}
	var r row
	err = s.db.WithContext(ctx).Where("name = ?", name).Take(&r).Error
	stored := ""
	switch {
	case err == nil:
		v, derr := s.keys.Decrypt(r.Ciphertext, aad(name))
		if derr == nil {
			return string(v), nil
		}
		// A value sealed with a key no longer configured is as good as absent; the
		// environment may still provide it, and the error says why the store did not.
		stored = "; the stored value cannot be decrypted with the configured SERVICE_SECRET_KEY (set it again)"
	case database.IsNotFound(err):
	default:
		return "", apperr.ErrInternal.Wrap(err)
	}
	if v := s.getenv(name); v != "" {
		return v, nil
	}
	return "", ErrCredential.Msg("credentialRef %s: no credential %s in the local store and no environment variable %s%s", ref, name, name, stored).
		WithDetails(map[string]any{"ref": ref})
}

// Package connections stores named credentials for tools and tool servers. A connection's
// secret is write-only: it is encrypted at rest with SERVICE_SECRET_KEY (platform/secrets),
// bound to its row, never returned, and resolved only at step time by the graph runtime.
package connections

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/secrets"
	"gorm.io/gorm"
)

const idPrefix = "con_"

var idPattern = regexp.MustCompile(`^con_[0-9a-f]{32}$`)

// Secret statuses shown by the API.
const (
	SecretNone          = "none"          // no secret stored
	SecretOK            = "ok"            // decrypts with the configured keys
	SecretUndecryptable = "undecryptable" // its key is not configured (or the row was tampered with)
)

// Connection is a connection as the API shows it: the secret is never included, and
// secret-like config keys are redacted.
type Connection struct {
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	Kind   string         `json:"kind"`
	Config map[string]any `json:"config"`
	// Enabled is false for a connection that Resolve must refuse.
	Enabled   bool `json:"enabled"`
	HasSecret bool `json:"hasSecret"`
	// SecretStatus is none, ok or undecryptable.
	SecretStatus string `json:"secretStatus"`
	// Usable says whether a tool using it right now would get its credential.
	Usable    bool      `json:"usable"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

type row struct {
	ID        string `gorm:"primaryKey"`
	Name      string
	Kind      string
	Config    string
	Secret    *string
	Enabled   bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (row) TableName() string { return "connections" }

// aad binds a ciphertext to its row: copied onto another connection it does not decrypt.
func aad(id string) []byte { return []byte("connection:" + id) }

// Service is the domain logic of connections (no HTTP).
type Service struct {
	db   *database.DB
	keys *secrets.Keyring
	log  zerolog.Logger
}

// NewService builds the service; keys encrypt new secrets (first key) and decrypt (all).
func NewService(db *database.DB, keys *secrets.Keyring, logger zerolog.Logger) (*Service, error) {
	if db == nil || keys == nil {
		return nil, errors.New("connections: nil dependency")
	}
	return &Service{db: db, keys: keys, log: logger}, nil
}

// CreateInput is the body of POST /connections.
type CreateInput struct {
	Name    *string         `json:"name"`
	Kind    *string         `json:"kind"`
	Config  json.RawMessage `json:"config"`
	Secret  *string         `json:"secret"`
	Enabled *bool           `json:"enabled"`
}

// UpdateInput is the body of PATCH /connections/{id}. Name and kind are accepted only when
// unchanged (clients that send the whole object back); config replaces the whole config.
type UpdateInput struct {
	Name    *string         `json:"name"`
	Kind    *string         `json:"kind"`
	Config  json.RawMessage `json:"config"`
	Secret  *string         `json:"secret"`
	Enabled *bool           `json:"enabled"`
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return idPrefix + hex.EncodeToString(b[:])
}

// Create validates and stores a connection.
func (s *Service) Create(ctx context.Context, in CreateInput) (Connection, error) {
	if in.Name == nil || *in.Name == "" {
		return Connection{}, invalid("name", "is required")
	}
	if !ValidName(*in.Name) {
		return Connection{}, invalid("name", "must be letters, digits, '_', '.', '-' (starting with a letter or digit), up to 64 characters, and not start with %q", idPrefix)
	}
	if in.Kind == nil || *in.Kind == "" {
		return Connection{}, invalid("kind", "is required: %s or %s", KindHTTPAuth, KindMCPServer)
	}
	if *in.Kind != KindHTTPAuth && *in.Kind != KindMCPServer {
		return Connection{}, invalid("kind", "must be %s or %s", KindHTTPAuth, KindMCPServer)
	}
	cfg, err := normalizeConfig(*in.Kind, in.Config)
	if err != nil {
		return Connection{}, err
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return Connection{}, err
	}
	now := time.Now().UTC()
	r := row{ID: newID(), Name: *in.Name, Kind: *in.Kind, Config: string(cfgJSON), Enabled: true, CreatedAt: now, UpdatedAt: now}
	if in.Enabled != nil {
		r.Enabled = *in.Enabled
	}
	if in.Secret != nil && *in.Secret != "" {
		if err := checkSecret(*in.Secret); err != nil {
			return Connection{}, err
		}
		ct, err := s.keys.Encrypt([]byte(*in.Secret), aad(r.ID))
		if err != nil {
			return Connection{}, err
		}
		r.Secret = &ct
	}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		if database.IsDuplicate(err) {
			return Connection{}, ErrConnectionExists.Msg("a connection named %q already exists", r.Name)
		}
		return Connection{}, err
	}
	return s.view(r), nil
}

// find loads by id (con_…) or by name.
func (s *Service) find(ctx context.Context, tx *gorm.DB, ref string) (row, error) {
	var r row
	q := tx.WithContext(ctx)
	var err error
	switch {
	case idPattern.MatchString(ref):
		err = q.Take(&r, "id = ?", ref).Error
	case ValidName(ref):
		err = q.Take(&r, "name = ?", ref).Error
	default:
		return row{}, ErrConnectionNotFound
	}
	if database.IsNotFound(err) {
		return row{}, ErrConnectionNotFound
	}
	return r, err
}

// Get returns one connection by id or name.
func (s *Service) Get(ctx context.Context, ref string) (Connection, error) {
	r, err := s.find(ctx, s.db.DB, ref)
	if err != nil {
		return Connection{}, err
	}
	return s.view(r), nil
}

// Page is one page of a listing, newest first; Next is the cursor of the following page.
type Page struct {
	Connections []Connection `json:"connections"`
	Next        string       `json:"next,omitempty"`
}

// List returns up to limit connections, newest first, created before the cursor.
func (s *Service) List(ctx context.Context, limit int, before string) (Page, error) {
	q, err := database.Keyset(s.db.WithContext(ctx), "created_at", limit, before)
	if err != nil {
		return Page{}, invalid("before", "is not a cursor from a previous page")
	}
	var rows []row
	if err := q.Find(&rows).Error; err != nil {
		return Page{}, err
	}
	p := Page{}
	rows, p.Next = database.NextPage(rows, limit, func(r row) database.Cursor { return database.Cursor{At: r.CreatedAt, ID: r.ID} })
	p.Connections = make([]Connection, 0, len(rows))
	for _, r := range rows {
		p.Connections = append(p.Connections, s.view(r))
	}
	return p, nil
}

// Update applies a PATCH: config (replaced whole, validated against the kind), enabled, and
// a non-empty secret (re-encrypted in place under the first key). Nothing changes on error.
func (s *Service) Update(ctx context.Context, ref string, in UpdateInput) (Connection, error) {
	var out row
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		r, err := s.find(ctx, tx, ref)
		if err != nil {
			return err
		}
		if in.Name != nil && *in.Name != r.Name {
			return invalid("name", "cannot be changed; create a new connection instead")
		}
		if in.Kind != nil && *in.Kind != r.Kind {
			return invalid("kind", "cannot be changed; create a new connection instead")
		}
		set := map[string]any{}
		if in.Config != nil {
			cfg, err := normalizeConfig(r.Kind, in.Config)
			if err != nil {
				return err
			}
			b, err := json.Marshal(cfg)
			if err != nil {
				return err
			}
			r.Config = string(b)
			set["config"] = r.Config
		}
		if in.Enabled != nil {
			r.Enabled = *in.Enabled
			set["enabled"] = r.Enabled
		}
		if in.Secret != nil && *in.Secret != "" {
			if err := checkSecret(*in.Secret); err != nil {
				return err
			}
			ct, err := s.keys.Encrypt([]byte(*in.Secret), aad(r.ID))
			if err != nil {
				return err
			}
			r.Secret = &ct
			set["secret"] = ct
		}
		if len(set) > 0 {
			r.UpdatedAt = time.Now().UTC()
			set["updated_at"] = r.UpdatedAt
			if err := tx.Model(&row{}).Where("id = ?", r.ID).Updates(set).Error; err != nil {
				return err
			}
		}
		out = r
		return nil
	})
	if err != nil {
		return Connection{}, err
	}
	return s.view(out), nil
}

// Delete removes a connection; tools that use it get connection_not_found from then on.
func (s *Service) Delete(ctx context.Context, ref string) error {
	r, err := s.find(ctx, s.db.DB, ref)
	if err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Where("id = ?", r.ID).Delete(&row{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrConnectionNotFound
	}
	return nil
}

// secretStatus decrypts to classify; the plaintext is dropped at once.
func (s *Service) secretStatus(r row) string {
	if r.Secret == nil {
		return SecretNone
	}
	if _, err := s.keys.Decrypt(*r.Secret, aad(r.ID)); err != nil {
		return SecretUndecryptable
	}
	return SecretOK
}

func (s *Service) view(r row) Connection {
	var cfg map[string]any
	if err := json.Unmarshal([]byte(r.Config), &cfg); err != nil || cfg == nil {
		cfg = map[string]any{} // only a hand-edited row gets here; show it as empty, not a 500
	}
	st := s.secretStatus(r)
	return Connection{
		ID: r.ID, Name: r.Name, Kind: r.Kind, Config: Redact(cfg), Enabled: r.Enabled,
		HasSecret: r.Secret != nil, SecretStatus: st, Usable: r.Enabled && st == SecretOK,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// BasicAuth is a user/password pair for HTTP basic authentication.
type BasicAuth struct {
	Username string
	Password string
}

// Credential says how to apply a resolved connection's secret. For an http_auth connection
// exactly one of Header/Value, Basic or Query is set; for mcp_server either Header/Value
// (HTTP transports) or Env (stdio transports), and Server names the tool server it is for.
type Credential struct {
	Kind   string
	Server string            // mcp_server: the tool server this credential authenticates
	Header string            // header name, e.g. "Authorization"
	Value  string            // header value, e.g. "Bearer sk-…"
	Query  map[string]string // query parameters to add
	Basic  *BasicAuth        // HTTP basic authentication
	Env    map[string]string // environment variables for a stdio tool server
}

// String never prints the secret.
func (c Credential) String() string {
	return fmt.Sprintf("connections.Credential{Kind:%s Server:%s Header:%s}", c.Kind, c.Server, c.Header)
}

// Resolve returns the credential of the connection named name (an id works too), at step
// time. A deleted, disabled, secret-less or undecryptable connection gives a typed error
// (connection_not_found, connection_disabled, connection_no_secret, connection_undecryptable)
// whose message never contains the secret.
func (s *Service) Resolve(ctx context.Context, name string) (Credential, error) {
	r, err := s.find(ctx, s.db.DB, name)
	if err != nil {
		if errors.Is(err, ErrConnectionNotFound) {
			return Credential{}, ErrConnectionNotFound.Msg("connection %q does not exist (deleted?)", name)
		}
		return Credential{}, err
	}
	if !r.Enabled {
		return Credential{}, ErrConnectionDisabled.Msg("connection %q is disabled", r.Name)
	}
	if r.Secret == nil {
		return Credential{}, ErrConnectionNoSecret.Msg("connection %q has no secret", r.Name)
	}
	plain, err := s.keys.Decrypt(*r.Secret, aad(r.ID))
	if err != nil {
		keyID, _ := secrets.KeyID(*r.Secret)
		s.log.Warn().Str("connection_id", r.ID).Str("connection", r.Name).Str("key_id", keyID).
			Bool("unknown_key", errors.Is(err, secrets.ErrUnknownKey)).
			Msg("connection secret cannot be decrypted with the configured keys")
		return Credential{}, ErrConnectionUndecryptable.Msg("connection %q: its secret cannot be decrypted with the configured SERVICE_SECRET_KEY (was its key removed?); set the secret again", r.Name)
	}
	var cfg map[string]string
	if err := json.Unmarshal([]byte(r.Config), &cfg); err != nil {
		return Credential{}, apperr.ErrInternal.Wrap(fmt.Errorf("connection %s: stored config: %w", r.ID, err))
	}
	return credential(r.Kind, cfg, string(plain)), nil
}

// credential applies a stored (normalized) config to the plaintext secret.
func credential(kind string, cfg map[string]string, secret string) Credential {
	c := Credential{Kind: kind, Server: cfg["server"]}
	switch {
	case kind == KindHTTPAuth && cfg["type"] == AuthBasic:
		c.Basic = &BasicAuth{Username: cfg["username"], Password: secret}
	case kind == KindHTTPAuth && cfg["type"] == AuthQuery:
		c.Query = map[string]string{cfg["param"]: secret}
	case kind == KindMCPServer && cfg["env"] != "":
		c.Env = map[string]string{cfg["env"]: secret}
	default:
		c.Header = cfg["header"]
		c.Value = secret
		if scheme := cfg["scheme"]; scheme != "" {
			c.Value = scheme + " " + secret
		}
	}
	return c
}

// rotateBatch bounds how many rows Rotate holds in memory at once.
const rotateBatch = 200

// Rotate re-encrypts every connection secret not sealed under keys' first key. It is safe
// while the service runs (each row is rewritten only if its ciphertext is unchanged) and
// idempotent. It returns how many secrets it rewrote; secrets it cannot decrypt are left as
// they are and reported in the error, by connection id and name.
func (s *Service) Rotate(ctx context.Context, keys *secrets.Keyring) (int, error) {
	n := 0
	var failed []string
	after := ""
	for {
		var rows []row
		err := s.db.WithContext(ctx).Where("secret IS NOT NULL AND id > ?", after).Order("id").Limit(rotateBatch).Find(&rows).Error
		if err != nil {
			return n, err
		}
		if len(rows) == 0 {
			break
		}
		after = rows[len(rows)-1].ID
		for _, r := range rows {
			if !keys.NeedsRotation(*r.Secret) {
				continue
			}
			ct, err := keys.Rotate(*r.Secret, aad(r.ID))
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s (%s)", r.ID, r.Name))
				continue
			}
			res := s.db.WithContext(ctx).Model(&row{}).Where("id = ? AND secret = ?", r.ID, *r.Secret).
				Updates(map[string]any{"secret": ct, "updated_at": time.Now().UTC()})
			if res.Error != nil {
				return n, res.Error
			}
			// RowsAffected 0: a concurrent PATCH just wrote a fresh secret under the current key.
			n += int(res.RowsAffected)
		}
	}
	if len(failed) > 0 {
		return n, fmt.Errorf("connections: %d secret(s) cannot be decrypted with the configured keys and were left unchanged: %s", len(failed), strings.Join(failed, ", "))
	}
	return n, nil
}

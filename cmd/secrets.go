package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/svc-dev/svc/modules/connections"
	"github.com/svc-dev/svc/platform/config"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/secrets"
)

// secretStore is one table of encrypted secrets that `svc secrets rotate` re-encrypts
// under the first key of SERVICE_SECRET_KEY. Rotate must be idempotent, safe while the
// service runs, and leave (and report in its error) secrets it cannot decrypt.
type secretStore interface {
	Rotate(ctx context.Context, keys *secrets.Keyring) (n int, err error)
}

// namedStore labels a store in the command's output.
type namedStore struct {
	name  string
	store secretStore
}

// secretStores lists every place the service keeps encrypted secrets.
func secretStores(db *database.DB, keys *secrets.Keyring) ([]namedStore, error) {
	conns, err := connections.NewService(db, keys, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	return []namedStore{
		{name: "connections", store: conns},
		{name: "inference credentials", store: credentialTable{db: db}},
		{name: "webhook triggers", store: triggerSecrets{db: db}},
	}, nil
}

func newSecretsCmd() *cobra.Command {
	sec := &cobra.Command{
		Use:   "secrets",
		Short: "Maintain the secrets stored encrypted with SERVICE_SECRET_KEY",
	}
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Re-encrypt every stored secret under the first key of SERVICE_SECRET_KEY",
		Long: `Re-encrypt every stored secret (connection secrets, webhook trigger secrets and the
inference plane's local credentials) under the first key of SERVICE_SECRET_KEY, so that the other keys can then be
removed. Run it with the new key first and the old keys after it, e.g.
SERVICE_SECRET_KEY="<new>,<old>". It talks to the database directly, is safe while the service
runs, and can be repeated. Secrets that no configured key decrypts are left unchanged and
listed; the command then exits with status 1.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			if strings.TrimSpace(cfg.SecretKey) == "" {
				return &config.Error{Env: "SERVICE_SECRET_KEY", Err: errors.New("is unset: rotation needs the new key first and the old keys after it")}
			}
			keys, err := secrets.ParseKeys(cfg.SecretKey)
			if err != nil {
				return &config.Error{Env: "SERVICE_SECRET_KEY", Err: err}
			}
			ctx := c.Context()
			db, err := database.Open(ctx, cfg.DatabaseURL, cfg.SQLitePath())
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("database: %w", err)}
			}
			defer db.Close()
			if err := db.Migrate(ctx); err != nil {
				return &exitError{code: 1, err: err}
			}
			stores, err := secretStores(db, keys)
			if err != nil {
				return err
			}
			if err := rotateSecrets(ctx, c.OutOrStdout(), keys, stores); err != nil {
				return &exitError{code: 1, err: err}
			}
			return nil
		},
	}
	config.AddFlags(rotate.Flags())
	sec.AddCommand(rotate)
	return sec
}

// rotateSecrets rotates every store, reporting each, and returns the stores' failures joined.
func rotateSecrets(ctx context.Context, out io.Writer, keys *secrets.Keyring, stores []namedStore) error {
	fmt.Fprintf(out, "re-encrypting under key %s\n", keys.PrimaryID())
	var errs []error
	for _, s := range stores {
		n, err := s.store.Rotate(ctx, keys)
		fmt.Fprintf(out, "%s: %d re-encrypted\n", s.name, n)
		if err != nil {
			fmt.Fprintf(out, "%s: %v\n", s.name, err)
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("some secrets were not re-encrypted (set them again, or add their old key to SERVICE_SECRET_KEY and rerun): %w", errors.Join(errs...))
	}
	fmt.Fprintln(out, "done: every stored secret is under the first key; the other keys can be removed")
	return nil
}

// credentialTable rotates the inference plane's credential store (modules/credentials):
// table inference_credentials, ciphertext bound to "credential:"+name, the binding that
// module uses. A test in secrets_test.go writes through that module and reads back through
// it, so a drift in either breaks the build's tests, not production.
type credentialTable struct{ db *database.DB }

type credentialRow struct {
	Name       string
	Ciphertext string
}

// Rotate implements secretStore.
func (t credentialTable) Rotate(ctx context.Context, keys *secrets.Keyring) (int, error) {
	var rows []credentialRow
	if err := t.db.WithContext(ctx).Table("inference_credentials").Select("name, ciphertext").Order("name").Find(&rows).Error; err != nil {
		return 0, err
	}
	n := 0
	var failed []string
	for _, r := range rows {
		if !keys.NeedsRotation(r.Ciphertext) {
			continue
		}
		aad := []byte("credential:" + r.Name)
		ct, err := keys.Rotate(r.Ciphertext, aad)
		if err != nil {
			failed = append(failed, r.Name)
			continue
		}
		res := t.db.WithContext(ctx).Table("inference_credentials").
			Where("name = ? AND ciphertext = ?", r.Name, r.Ciphertext).
			Updates(map[string]any{"ciphertext": ct, "updated_at": time.Now().UTC()})
		if res.Error != nil {
			return n, res.Error
		}
		n += int(res.RowsAffected)
	}
	if len(failed) > 0 {
		return n, fmt.Errorf("%d credential(s) cannot be decrypted with the configured keys and were left unchanged: %s", len(failed), strings.Join(failed, ", "))
	}
	return n, nil
}

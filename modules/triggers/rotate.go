package triggers

import (
	"context"
	"fmt"
	"strings"

	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/secrets"
)

const rotateBatch = 200

// RotateSecrets re-encrypts every webhook secret not yet under the first key of keys (for
// `svc secrets rotate`). It is idempotent and safe while the service runs: a row is
// rewritten only if its ciphertext did not change meanwhile. Secrets no configured key
// decrypts are left as they are and listed (by trigger id) in the error.
func RotateSecrets(ctx context.Context, db *database.DB, keys *secrets.Keyring) (int, error) {
	n := 0
	var failed []string
	after := ""
	for {
		var rows []row
		err := db.WithContext(ctx).Where("secret IS NOT NULL AND id > ?", after).Order("id").Limit(rotateBatch).Find(&rows).Error
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
				failed = append(failed, r.ID)
				continue
			}
			res := db.WithContext(ctx).Model(&row{}).Where("id = ? AND secret = ?", r.ID, *r.Secret).UpdateColumn("secret", ct)
			if res.Error != nil {
				return n, res.Error
			}
			// RowsAffected 0: a concurrent PATCH just wrote a fresh secret under the current key.
			n += int(res.RowsAffected)
		}
	}
	if len(failed) > 0 {
		return n, fmt.Errorf("triggers: %d webhook secret(s) cannot be decrypted with the configured keys and were left unchanged: %s", len(failed), strings.Join(failed, ", "))
	}
	return n, nil
}

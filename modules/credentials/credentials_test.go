package credentials_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/credentials"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

const secretValue = "sk-test-THIS-MUST-NEVER-LEAK-0123456789"

type setup struct {
	srv  *testkit.Server
	svc  *credentials.Service
	db   *database.DB
	logs *bytes.Buffer
	env  map[string]string
}

func newSetup(t *testing.T, db *database.DB, keys *secrets.Keyring) *setup {
	t.Helper()
	env := map[string]string{}
	svc := credentials.New(db, keys, func(k string) string { return env[k] })
	logs := &bytes.Buffer{}
	srv := testkit.New(t, testkit.Options{LogTo: logs}, credentials.NewModule(svc))
	return &setup{srv: srv, svc: svc, db: db, logs: logs, env: env}
}

func TestCredentialsWriteOnlyEncryptedAndResolved(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, secrets.Ephemeral())
		var bodies [][]byte

		r := s.srv.Do(http.MethodPut, "/admin/credentials/OPENAI_KEY", map[string]string{"value": secretValue})
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		bodies = append(bodies, r.Body)
		r = s.srv.Do(http.MethodPut, "/admin/credentials/OPENAI_KEY", map[string]string{"value": secretValue + "-2"})
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"hasValue":true`) {
			t.Fatalf("replace: %d %s", r.Status, r.Body)
		}
		bodies = append(bodies, r.Body)

		r = s.srv.Do(http.MethodGet, "/admin/credentials", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		var list []credentials.Credential
		r.JSON(t, &list)
		if len(list) != 1 || list[0].Name != "OPENAI_KEY" || !list[0].HasValue {
			t.Fatalf("list = %+v", list)
		}
		bodies = append(bodies, r.Body)

		// Encrypted at rest: the column holds a ciphertext, not the value.
		var stored []string
		if err := db.Raw("SELECT ciphertext FROM inference_credentials").Scan(&stored).Error; err != nil {
			t.Fatal(err)
		}
		if len(stored) != 1 || strings.Contains(stored[0], secretValue) || !strings.HasPrefix(stored[0], "v1:") {
			t.Fatalf("stored = %q", stored)
		}

		// Resolution: the store wins over the environment.
		s.env["OPENAI_KEY"] = "from-env"
		v, err := s.svc.ResolveRef(context.Background(), "secret://OPENAI_KEY")
		if err != nil || v != secretValue+"-2" {
			t.Fatalf("resolve store: %q %v", v, err)
		}
		// Then the environment when the store has no such name.
		s.env["ONLY_ENV"] = "env-value"
		if v, err := s.svc.ResolveRef(context.Background(), "secret://ONLY_ENV"); err != nil || v != "env-value" {
			t.Fatalf("resolve env: %q %v", v, err)
		}
		// Deleting falls back to the environment.
		r = s.srv.Do(http.MethodDelete, "/admin/credentials/OPENAI_KEY", nil)
		if r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if v, err := s.svc.ResolveRef(context.Background(), "secret://OPENAI_KEY"); err != nil || v != "from-env" {
			t.Fatalf("resolve after delete: %q %v", v, err)
		}
		r = s.srv.Do(http.MethodDelete, "/admin/credentials/OPENAI_KEY", nil)
		if r.Status != http.StatusNotFound || r.ErrorCode() != "credential_not_found" {
			t.Fatalf("delete again: %d %s", r.Status, r.Body)
		}
		bodies = append(bodies, r.Body)

		for _, b := range bodies {
			if strings.Contains(string(b), secretValue) {
				t.Fatalf("a response carries the value: %s", b)
			}
		}
		if strings.Contains(s.logs.String(), secretValue) {
			t.Fatalf("the log carries the value")
		}
		if !strings.Contains(s.logs.String(), "/admin/credentials/OPENAI_KEY") {
			t.Fatalf("log capture is not working: %q", s.logs.String())
		}
	})
}

func TestCredentialErrorNamesRefNotValue(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		old := secrets.Ephemeral()
		s := newSetup(t, db, old)
		ctx := context.Background()
		if _, err := s.svc.ResolveRef(ctx, "secret://MISSING"); !errors.Is(err, credentials.ErrCredential) {
			t.Fatalf("missing: %v", err)
		} else if ae := apperr.From(err); ae.Status != http.StatusBadGateway || !strings.Contains(ae.Message, "secret://MISSING") {
			t.Fatalf("error = %+v", ae)
		}
		_, err := s.svc.ResolveRef(ctx, "sk-pasted-key-instead-of-a-ref")
		if !errors.Is(err, credentials.ErrCredential) || strings.Contains(err.Error(), "sk-pasted") {
			t.Fatalf("malformed ref: %v", err)
		}

		// A value sealed by a key that is gone (ephemeral key of a previous process):
		// listed without a value, and resolution says why.
		if _, err := s.svc.Set(ctx, "OLD", secretValue); err != nil {
			t.Fatal(err)
		}
		s2 := newSetup(t, db, secrets.Ephemeral())
		r := s2.srv.Do(http.MethodGet, "/admin/credentials", nil)
		if !strings.Contains(string(r.Body), `{"name":"OLD","hasValue":false}`) {
			t.Fatalf("list after key change: %s", r.Body)
		}
		_, err = s2.svc.ResolveRef(ctx, "secret://OLD")
		if !errors.Is(err, credentials.ErrCredential) || !strings.Contains(err.Error(), "cannot be decrypted") || strings.Contains(err.Error(), secretValue) {
			t.Fatalf("undecryptable: %v", err)
		}
	})
}

func TestCredentialBadInputChangesNothing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		s := newSetup(t, db, secrets.Ephemeral())
		cases := []struct {
			name, path string
			body       any
			code       string
		}{
			{"digit first", "/admin/credentials/1KEY", map[string]string{"value": "x"}, "invalid_credential_name"},
			{"dash", "/admin/credentials/MY-KEY", map[string]string{"value": "x"}, "invalid_credential_name"},
			{"too long", "/admin/credentials/" + strings.Repeat("A", 129), map[string]string{"value": "x"}, "invalid_credential_name"},
			{"empty value", "/admin/credentials/KEY", map[string]string{"value": ""}, "invalid_credential_value"},
			{"missing value", "/admin/credentials/KEY", map[string]string{}, "invalid_credential_value"},
			{"huge value", "/admin/credentials/KEY", map[string]string{"value": strings.Repeat("x", credentials.MaxValueBytes+1)}, "invalid_credential_value"},
			{"number value", "/admin/credentials/KEY", `{"value": 12}`, "invalid_request"},
			{"unknown field", "/admin/credentials/KEY", `{"value": "x", "extra": 1}`, "invalid_request"},
			{"malformed", "/admin/credentials/KEY", `{"value": `, "invalid_request"},
			{"no body", "/admin/credentials/KEY", nil, "invalid_request"},
		}
		for _, tc := range cases {
			r := s.srv.Do(http.MethodPut, tc.path, tc.body)
			if r.Status != http.StatusBadRequest || r.ErrorCode() != tc.code {
				t.Errorf("%s: %d %s", tc.name, r.Status, r.Body)
			}
		}
		r := s.srv.Do(http.MethodDelete, "/admin/credentials/bad-name", nil)
		if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_credential_name" {
			t.Errorf("delete bad name: %d %s", r.Status, r.Body)
		}
		var n int64
		db.Raw("SELECT COUNT(*) FROM inference_credentials").Scan(&n)
		if n != 0 {
			t.Fatalf("%d rows stored by bad input", n)
		}
	})
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"secret://A", "secret://", "secret://a_b9", "secret://9", "http://x", "secret://A/B", "secret://A B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		name, err := credentials.ParseRef(ref)
		if err != nil {
			return
		}
		if "secret://"+name != ref || !credentials.ValidName(name) {
			t.Fatalf("ParseRef(%q) = %q", ref, name)
		}
	})
}

package connections_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/connections"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/secrets"
	"github.com/svc-dev/svc/platform/testkit"
)

// logBuf collects log lines from the server and the module (concurrent writers).
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newKey(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func keyring(t testing.TB, spec string) *secrets.Keyring {
	t.Helper()
	k, err := secrets.ParseKeys(spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type bundle struct {
	srv  *testkit.Server
	svc  *connections.Service
	db   *database.DB
	logs *logBuf
}

// start mounts a fresh module instance on db with keys: calling it again on the same db is
// a service restart.
func start(t testing.TB, db *database.DB, keys *secrets.Keyring) *bundle {
	t.Helper()
	logs := &logBuf{}
	svc, err := connections.NewService(db, keys, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	srv := testkit.New(t, testkit.Options{LogTo: logs}, connections.New(svc))
	return &bundle{srv: srv, svc: svc, db: db, logs: logs}
}

func (b *bundle) count(t testing.TB) int64 {
	t.Helper()
	var n int64
	if err := b.db.Table("connections").Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

type storedRow struct {
	ID, Name, Kind, Config string
	Secret                 *string
	Enabled                bool
}

func (b *bundle) row(t testing.TB, id string) storedRow {
	t.Helper()
	var r storedRow
	if err := b.db.Table("connections").Select("id, name, kind, config, secret, enabled").Where("id = ?", id).Take(&r).Error; err != nil {
		t.Fatal(err)
	}
	return r
}

type conn struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Kind         string         `json:"kind"`
	Config       map[string]any `json:"config"`
	Enabled      bool           `json:"enabled"`
	HasSecret    bool           `json:"hasSecret"`
	SecretStatus string         `json:"secretStatus"`
	Usable       bool           `json:"usable"`
}

func create(t testing.TB, b *bundle, body any) conn {
	t.Helper()
	r := b.srv.Do(http.MethodPost, "/connections", body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var c conn
	r.JSON(t, &c)
	return c
}

func TestCRUD(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := start(t, db, keyring(t, newKey(t)))
		c := create(t, b, map[string]any{"name": "github", "kind": "http_auth", "config": map[string]any{"type": "header"}, "secret": "ghp_abc"})
		if !strings.HasPrefix(c.ID, "con_") || c.Name != "github" || c.Kind != "http_auth" || !c.Enabled || !c.HasSecret || c.SecretStatus != "ok" || !c.Usable {
			t.Fatalf("created: %+v", c)
		}
		if c.Config["type"] != "header" || c.Config["header"] != "Authorization" || c.Config["scheme"] != "Bearer" {
			t.Fatalf("defaults not applied: %v", c.Config)
		}

		for _, ref := range []string{c.ID, "github"} {
			g := b.srv.Do(http.MethodGet, "/connections/"+ref, nil)
			var got conn
			g.JSON(t, &got)
			if g.Status != http.StatusOK || got.ID != c.ID {
				t.Fatalf("get %s: %d %s", ref, g.Status, g.Body)
			}
		}
		create(t, b, map[string]any{"name": "fs", "kind": "mcp_server", "config": map[string]any{"server": "filesystem", "env": "FS_TOKEN"}, "enabled": false})
		l := b.srv.Do(http.MethodGet, "/connections", nil)
		var page struct {
			Connections []conn `json:"connections"`
			Next        string `json:"next"`
		}
		l.JSON(t, &page)
		if l.Status != http.StatusOK || len(page.Connections) != 2 || page.Connections[0].Name != "fs" || page.Next != "" {
			t.Fatalf("list: %d %s", l.Status, l.Body)
		}
		if fs := page.Connections[0]; fs.HasSecret || fs.SecretStatus != "none" || fs.Usable || fs.Enabled {
			t.Fatalf("fs: %+v", fs)
		}
		l = b.srv.Do(http.MethodGet, "/connections?limit=1", nil)
		page.Next = ""
		l.JSON(t, &page)
		if len(page.Connections) != 1 || page.Next == "" {
			t.Fatalf("page 1: %s", l.Body)
		}
		l = b.srv.Do(http.MethodGet, "/connections?limit=1&before="+page.Next, nil)
		page.Next = ""
		l.JSON(t, &page)
		if len(page.Connections) != 1 || page.Connections[0].Name != "github" || page.Next != "" {
			t.Fatalf("page 2: %s", l.Body)
		}

		// PATCH: enabled, then the secret in place (ciphertext changes, id and name do not).
		before := b.row(t, c.ID)
		p := b.srv.Do(http.MethodPatch, "/connections/"+c.ID, map[string]any{"enabled": false})
		var pc conn
		p.JSON(t, &pc)
		if p.Status != http.StatusOK || pc.Enabled || pc.Usable || pc.SecretStatus != "ok" {
			t.Fatalf("disable: %d %s", p.Status, p.Body)
		}
		p = b.srv.Do(http.MethodPatch, "/connections/github", map[string]any{"secret": "ghp_new", "enabled": true, "name": "github", "kind": "http_auth"})
		p.JSON(t, &pc)
		after := b.row(t, c.ID)
		if p.Status != http.StatusOK || !pc.Usable || *after.Secret == *before.Secret || after.Config != before.Config {
			t.Fatalf("rotate secret: %d %s", p.Status, p.Body)
		}
		cred, err := b.svc.Resolve(context.Background(), "github")
		if err != nil || cred.Value != "Bearer ghp_new" {
			t.Fatalf("resolve after rotation: %v %v", cred, err)
		}
		// An empty secret leaves it alone; config is replaced whole.
		p = b.srv.Do(http.MethodPatch, "/connections/github", map[string]any{"secret": "", "config": map[string]any{"type": "header", "header": "x-api-key"}})
		p.JSON(t, &pc)
		if p.Status != http.StatusOK || pc.Config["header"] != "X-Api-Key" || pc.Config["scheme"] != "" || *b.row(t, c.ID).Secret != *after.Secret {
			t.Fatalf("config: %d %s", p.Status, p.Body)
		}

		d := b.srv.Do(http.MethodDelete, "/connections/"+c.ID, nil)
		if d.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", d.Status, d.Body)
		}
		for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPatch} {
			var body any
			if m == http.MethodPatch {
				body = map[string]any{"enabled": true}
			}
			if r := b.srv.Do(m, "/connections/"+c.ID, body); r.Status != http.StatusNotFound || r.ErrorCode() != "connection_not_found" {
				t.Fatalf("%s after delete: %d %s", m, r.Status, r.Body)
			}
		}
		if _, err := b.svc.Resolve(context.Background(), "github"); !errors.Is(err, connections.ErrConnectionNotFound) {
			t.Fatalf("resolve deleted: %v", err)
		}
	})
}

func TestDuplicateName(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := start(t, db, keyring(t, newKey(t)))
		body := map[string]any{"name": "dup", "kind": "http_auth", "config": map[string]any{"type": "query", "param": "api_key"}, "secret": "s1"}
		create(t, b, body)
		r := b.srv.Do(http.MethodPost, "/connections", body)
		if r.Status != http.StatusConflict || r.ErrorCode() != "connection_exists" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if b.count(t) != 1 {
			t.Fatal("duplicate stored")
		}
	})
}

func TestCreateValidation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := start(t, db, keyring(t, newKey(t)))
		hdr := map[string]any{"type": "header"}
		cases := []struct {
			name string
			body any
		}{
			{"empty body", ""},
			{"not json", "{"},
			{"array", "[]"},
			{"unknown field", map[string]any{"name": "a", "kind": "http_auth", "config": hdr, "extra": 1}},
			{"no name", map[string]any{"kind": "http_auth", "config": hdr}},
			{"empty name", map[string]any{"name": "", "kind": "http_auth", "config": hdr}},
			{"name with slash", map[string]any{"name": "a/b", "kind": "http_auth", "config": hdr}},
			{"name too long", map[string]any{"name": strings.Repeat("a", 65), "kind": "http_auth", "config": hdr}},
			{"name like an id", map[string]any{"name": "con_x", "kind": "http_auth", "config": hdr}},
			{"name not a string", map[string]any{"name": 5, "kind": "http_auth", "config": hdr}},
			{"no kind", map[string]any{"name": "a", "config": hdr}},
			{"bad kind", map[string]any{"name": "a", "kind": "oauth", "config": hdr}},
			{"no config", map[string]any{"name": "a", "kind": "http_auth"}},
			{"null config", map[string]any{"name": "a", "kind": "http_auth", "config": nil}},
			{"config array", map[string]any{"name": "a", "kind": "http_auth", "config": []int{1}}},
			{"config string", map[string]any{"name": "a", "kind": "http_auth", "config": "x"}},
			{"no type", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{}}},
			{"bad type", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "digest"}}},
			{"type not string", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": 1}}},
			{"unknown config key", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "header", "color": "red"}}},
			{"token in config", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "header", "token": "abc"}}},
			{"header bad", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "header", "header": "X Bad"}}},
			{"header host", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "header", "header": "host"}}},
			{"header empty", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "header", "header": ""}}},
			{"scheme bad", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "header", "scheme": "Bearer x"}}},
			{"basic no username", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "basic"}}},
			{"basic colon", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "basic", "username": "a:b"}}},
			{"basic with header", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "basic", "username": "u", "header": "X-A"}}},
			{"query no param", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "query"}}},
			{"query param newline", map[string]any{"name": "a", "kind": "http_auth", "config": map[string]any{"type": "query", "param": "a\nb"}}},
			{"mcp no server", map[string]any{"name": "a", "kind": "mcp_server", "config": map[string]any{}}},
			{"mcp bad server", map[string]any{"name": "a", "kind": "mcp_server", "config": map[string]any{"server": "../x"}}},
			{"mcp env and header", map[string]any{"name": "a", "kind": "mcp_server", "config": map[string]any{"server": "s", "env": "A", "header": "X-A"}}},
			{"mcp env and scheme", map[string]any{"name": "a", "kind": "mcp_server", "config": map[string]any{"server": "s", "env": "A", "scheme": "Bearer"}}},
			{"mcp bad env", map[string]any{"name": "a", "kind": "mcp_server", "config": map[string]any{"server": "s", "env": "1A"}}},
			{"mcp type key", map[string]any{"name": "a", "kind": "mcp_server", "config": map[string]any{"server": "s", "type": "header"}}},
			{"secret not string", map[string]any{"name": "a", "kind": "http_auth", "config": hdr, "secret": 42}},
			{"secret with newline", map[string]any{"name": "a", "kind": "http_auth", "config": hdr, "secret": "abc\r\nX-Evil: 1"}},
			{"secret too long", map[string]any{"name": "a", "kind": "http_auth", "config": hdr, "secret": strings.Repeat("s", 16<<10+1)}},
			{"enabled not bool", map[string]any{"name": "a", "kind": "http_auth", "config": hdr, "enabled": "yes"}},
		}
		for _, c := range cases {
			r := b.srv.Do(http.MethodPost, "/connections", c.body)
			if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_request" {
				t.Errorf("%s: %d %s", c.name, r.Status, r.Body)
			}
		}
		if n := b.count(t); n != 0 {
			t.Fatalf("%d rows stored by rejected requests", n)
		}
	})
}

func TestUpdateValidation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := start(t, db, keyring(t, newKey(t)))
		c := create(t, b, map[string]any{"name": "svc", "kind": "http_auth", "config": map[string]any{"type": "basic", "username": "bot"}, "secret": "pw"})
		before := b.row(t, c.ID)
		cases := []struct {
			name string
			body any
		}{
			{"rename", map[string]any{"name": "other"}},
			{"change kind", map[string]any{"kind": "mcp_server"}},
			{"config of another type invalid", map[string]any{"config": map[string]any{"type": "basic"}}},
			{"config for another kind", map[string]any{"config": map[string]any{"server": "s"}}},
			{"config unknown key", map[string]any{"config": map[string]any{"type": "basic", "username": "u", "password": "p"}}},
			{"config null", map[string]any{"config": nil}},
			{"secret control chars", map[string]any{"secret": "a\x00b", "enabled": false}},
			{"unknown field", map[string]any{"enabled": false, "colour": "x"}},
			{"enabled wrong type", map[string]any{"enabled": 0}},
			{"malformed", "{"},
		}
		for _, tc := range cases {
			r := b.srv.Do(http.MethodPatch, "/connections/"+c.ID, tc.body)
			if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_request" {
				t.Errorf("%s: %d %s", tc.name, r.Status, r.Body)
			}
		}
		after := b.row(t, c.ID)
		if after.Name != before.Name || after.Kind != before.Kind || after.Config != before.Config || *after.Secret != *before.Secret || after.Enabled != before.Enabled {
			t.Fatalf("rejected patches changed the row:\n%+v\n%+v", before, after)
		}
		for _, ref := range []string{"con_0123456789abcdef0123456789abcdef", "nope", "..%2f..", "con_"} {
			if r := b.srv.Do(http.MethodGet, "/connections/"+ref, nil); r.Status != http.StatusNotFound || r.ErrorCode() != "connection_not_found" {
				t.Errorf("get %s: %d %s", ref, r.Status, r.Body)
			}
		}
		if r := b.srv.Do(http.MethodGet, "/connections?limit=0", nil); r.ErrorCode() != "invalid_request" {
			t.Errorf("limit=0: %s", r.Body)
		}
		if r := b.srv.Do(http.MethodGet, "/connections?before=zzz", nil); r.ErrorCode() != "invalid_request" {
			t.Errorf("bad cursor: %s", r.Body)
		}
	})
}

func TestResolve(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := start(t, db, keyring(t, newKey(t)))
		ctx := context.Background()
		mk := func(name, kind string, cfg map[string]any, secret string) {
			body := map[string]any{"name": name, "kind": kind, "config": cfg}
			if secret != "" {
				body["secret"] = secret
			}
			create(t, b, body)
		}
		mk("hdr", "http_auth", map[string]any{"type": "header", "header": "X-API-Key"}, "k1")
		mk("tok", "http_auth", map[string]any{"type": "header", "scheme": "Token"}, "k2")
		mk("bare", "http_auth", map[string]any{"type": "header", "scheme": ""}, "k3")
		mk("basic", "http_auth", map[string]any{"type": "basic", "username": "bot"}, "pw")
		mk("query", "http_auth", map[string]any{"type": "query", "param": "api_key"}, "q1")
		mk("mcp-http", "mcp_server", map[string]any{"server": "search"}, "m1")
		mk("mcp-env", "mcp_server", map[string]any{"server": "github", "env": "GITHUB_TOKEN"}, "m2")
		mk("nosecret", "http_auth", map[string]any{"type": "header"}, "")

		check := func(name string, ok func(c connections.Credential) bool) {
			t.Helper()
			c, err := b.svc.Resolve(ctx, name)
			if err != nil || !ok(c) {
				t.Errorf("%s: %+v %v", name, c, err)
			}
		}
		check("hdr", func(c connections.Credential) bool { return c.Header == "X-Api-Key" && c.Value == "k1" })
		check("tok", func(c connections.Credential) bool { return c.Header == "Authorization" && c.Value == "Token k2" })
		check("bare", func(c connections.Credential) bool { return c.Header == "Authorization" && c.Value == "k3" })
		check("basic", func(c connections.Credential) bool {
			return c.Basic != nil && c.Basic.Username == "bot" && c.Basic.Password == "pw" && c.Header == ""
		})
		check("query", func(c connections.Credential) bool { return c.Query["api_key"] == "q1" && c.Header == "" })
		check("mcp-http", func(c connections.Credential) bool {
			return c.Server == "search" && c.Header == "Authorization" && c.Value == "Bearer m1"
		})
		check("mcp-env", func(c connections.Credential) bool {
			return c.Server == "github" && c.Env["GITHUB_TOKEN"] == "m2" && c.Header == ""
		})
		if s := (connections.Credential{Header: "A", Value: "Bearer k1"}).String(); strings.Contains(s, "k1") {
			t.Errorf("Credential.String prints the secret: %s", s)
		}

		expect := func(name string, want *apperr.Error) {
			t.Helper()
			_, err := b.svc.Resolve(ctx, name)
			if !errors.Is(err, want) {
				t.Errorf("%s: want %s, got %v", name, want.Code, err)
			}
		}
		expect("nosecret", connections.ErrConnectionNoSecret)
		expect("missing", connections.ErrConnectionNotFound)
		expect("../etc", connections.ErrConnectionNotFound)
		b.srv.Do(http.MethodPatch, "/connections/hdr", map[string]any{"enabled": false})
		expect("hdr", connections.ErrConnectionDisabled)
	})
}

// TestSecretNeverLeaks drives every endpoint, including failures, with a recognisable
// secret, then searches every response body and header and every log line for it, and the
// table for its plaintext.
func TestSecretNeverLeaks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := start(t, db, keyring(t, newKey(t)))
		secret := "sk-LEAKCANARY-" + newKey(t)
		secret2 := "pw-LEAKCANARY2-" + newKey(t)
		var responses []*testkit.Response
		do := func(method, path string, body any) *testkit.Response {
			r := b.srv.Do(method, path, body)
			responses = append(responses, r)
			return r
		}
		c := do(http.MethodPost, "/connections", map[string]any{"name": "leak", "kind": "http_auth", "config": map[string]any{"type": "header"}, "secret": secret})
		var cc conn
		c.JSON(t, &cc)
		do(http.MethodPost, "/connections", map[string]any{"name": "leak", "kind": "http_auth", "config": map[string]any{"type": "header"}, "secret": secret})
		do(http.MethodPost, "/connections", map[string]any{"name": "bad kind", "kind": "x", "config": map[string]any{"type": "header"}, "secret": secret})
		do(http.MethodPost, "/connections", map[string]any{"name": "b", "kind": "http_auth", "config": map[string]any{"type": "header", "token": secret}})
		do(http.MethodPost, "/connections", map[string]any{"name": "b", "kind": "http_auth", "config": map[string]any{"type": "header", "scheme": secret}})
		do(http.MethodPost, "/connections", map[string]any{"name": "b", "kind": "http_auth", "config": map[string]any{"type": "basic", "username": "u"}, "secret": secret + "\n"})
		do(http.MethodPost, "/connections", `{"name":"b","kind":"http_auth","config":{"type":"header"},"secret":"`+secret+`"`)
		do(http.MethodPost, "/connections", map[string]any{"name": "b", "kind": "http_auth", "config": map[string]any{"type": "header"}, "secret": secret, "x": secret})
		do(http.MethodGet, "/connections", nil)
		do(http.MethodGet, "/connections/"+cc.ID, nil)
		do(http.MethodGet, "/connections/leak", nil)
		do(http.MethodPatch, "/connections/leak", map[string]any{"secret": secret2})
		do(http.MethodPatch, "/connections/leak", map[string]any{"secret": secret2 + "\x00", "name": "x"})
		do(http.MethodPatch, "/connections/leak", map[string]any{"config": map[string]any{"type": "header", "password": secret2}})
		do(http.MethodPatch, "/connections/leak", map[string]any{"enabled": false})
		do(http.MethodGet, "/connections/leak", nil)
		if _, err := b.svc.Resolve(context.Background(), "leak"); err == nil || strings.Contains(err.Error(), secret2) {
			t.Fatalf("resolve disabled: %v", err)
		}
		do(http.MethodPatch, "/connections/leak", map[string]any{"enabled": true})
		cred, err := b.svc.Resolve(context.Background(), "leak")
		if err != nil || cred.Value != "Bearer "+secret2 {
			t.Fatalf("resolve: %v", err)
		}
		// Make it undecryptable: the error and the warning log must not carry it either.
		restarted := start(t, db, keyring(t, newKey(t)))
		if _, err := restarted.svc.Resolve(context.Background(), "leak"); !errors.Is(err, connections.ErrConnectionUndecryptable) || strings.Contains(err.Error(), secret2) {
			t.Fatalf("undecryptable: %v", err)
		}
		responses = append(responses, restarted.srv.Do(http.MethodGet, "/connections/leak", nil))
		do(http.MethodDelete, "/connections/leak", nil)

		for _, s := range []string{secret, secret2, "LEAKCANARY"} {
			for i, r := range responses {
				if strings.Contains(string(r.Body), s) {
					t.Fatalf("response %d carries the secret: %s", i, r.Body)
				}
				for k, v := range r.Header {
					if strings.Contains(strings.Join(v, " "), s) {
						t.Fatalf("response %d header %s carries the secret", i, k)
					}
				}
			}
			for _, logs := range []string{b.logs.String(), restarted.logs.String()} {
				if strings.Contains(logs, s) {
					t.Fatalf("logs carry the secret:\n%s", logs)
				}
			}
		}
		if !strings.Contains(b.logs.String(), `"path":"/connections`) || !strings.Contains(restarted.logs.String(), "cannot be decrypted") {
			t.Fatalf("the log capture saw nothing; the search proves nothing:\n%s", b.logs.String())
		}
	})
}

// TestSecretEncryptedAtRest reads the table: only a ciphertext bound to the row is there.
func TestSecretEncryptedAtRest(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		keys := keyring(t, newKey(t))
		b := start(t, db, keys)
		secret := "plaintext-" + newKey(t)
		c := create(t, b, map[string]any{"name": "atrest", "kind": "http_auth", "config": map[string]any{"type": "header"}, "secret": secret})
		other := create(t, b, map[string]any{"name": "other", "kind": "http_auth", "config": map[string]any{"type": "header"}, "secret": "x"})
		var dump []map[string]any
		if err := db.Table("connections").Find(&dump).Error; err != nil {
			t.Fatal(err)
		}
		for _, r := range dump {
			for k, v := range r {
				if s, ok := v.(string); ok && (strings.Contains(s, secret) || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte(secret)))) {
					t.Fatalf("column %s holds the plaintext", k)
				}
			}
		}
		r := b.row(t, c.ID)
		if r.Secret == nil || !strings.HasPrefix(*r.Secret, "v1:"+keys.PrimaryID()+":") {
			t.Fatalf("stored secret is not a v1 ciphertext under the primary key")
		}
		// The ciphertext is bound to its row: copied onto another connection it is undecryptable.
		if err := db.Table("connections").Where("id = ?", other.ID).Update("secret", *r.Secret).Error; err != nil {
			t.Fatal(err)
		}
		var got conn
		b.srv.Do(http.MethodGet, "/connections/other", nil).JSON(t, &got)
		if got.SecretStatus != "undecryptable" || got.Usable {
			t.Fatalf("copied ciphertext accepted: %+v", got)
		}
	})
}

// TestKeyRotation: write under A; restart with "B,A": reads work, new writes use B; rotate
// re-encrypts under B; restart with only B: rotated connections work, one written under A
// after the rotation shows as undecryptable and Resolve refuses it.
func TestKeyRotation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		keyA, keyB := newKey(t), newKey(t)
		ringA, ringB := keyring(t, keyA), keyring(t, keyB)

		a := start(t, db, ringA)
		c1 := create(t, a, map[string]any{"name": "one", "kind": "http_auth", "config": map[string]any{"type": "header"}, "secret": "s-one"})
		create(t, a, map[string]any{"name": "two", "kind": "http_auth", "config": map[string]any{"type": "basic", "username": "u"}, "secret": "s-two"})
		create(t, a, map[string]any{"name": "none", "kind": "mcp_server", "config": map[string]any{"server": "x"}})

		ba := start(t, db, keyring(t, keyB+","+keyA))
		for _, n := range []string{"one", "two"} {
			var got conn
			ba.srv.Do(http.MethodGet, "/connections/"+n, nil).JSON(t, &got)
			if got.SecretStatus != "ok" || !got.Usable {
				t.Fatalf("%s under B,A: %+v", n, got)
			}
		}
		if cred, err := ba.svc.Resolve(ctx, "one"); err != nil || cred.Value != "Bearer s-one" {
			t.Fatalf("resolve under B,A: %v %v", cred, err)
		}
		c3 := create(t, ba, map[string]any{"name": "three", "kind": "http_auth", "config": map[string]any{"type": "query", "param": "k"}, "secret": "s-three"})
		if id, _ := secrets.KeyID(*ba.row(t, c3.ID).Secret); id != ringB.PrimaryID() {
			t.Fatalf("new write under %s, want B %s", id, ringB.PrimaryID())
		}
		if id, _ := secrets.KeyID(*ba.row(t, c1.ID).Secret); id != ringA.PrimaryID() {
			t.Fatalf("old row rewritten by a read")
		}

		// A connection written under A only, that the rotation will not see (it is created
		// by a process still running with A alone, after the rotation).
		n, err := ba.svc.Rotate(ctx, keyring(t, keyB+","+keyA))
		if err != nil || n != 2 {
			t.Fatalf("rotate: n=%d err=%v", n, err)
		}
		if n, err := ba.svc.Rotate(ctx, keyring(t, keyB+","+keyA)); err != nil || n != 0 {
			t.Fatalf("second rotate is not a no-op: n=%d err=%v", n, err)
		}
		late := create(t, a, map[string]any{"name": "late", "kind": "http_auth", "config": map[string]any{"type": "header"}, "secret": "s-late"})

		onlyB := start(t, db, ringB)
		for _, n := range []string{"one", "two", "three"} {
			var got conn
			onlyB.srv.Do(http.MethodGet, "/connections/"+n, nil).JSON(t, &got)
			if got.SecretStatus != "ok" || !got.Usable {
				t.Fatalf("%s under B: %+v", n, got)
			}
		}
		if cred, err := onlyB.svc.Resolve(ctx, "two"); err != nil || cred.Basic == nil || cred.Basic.Password != "s-two" {
			t.Fatalf("resolve rotated under B: %v", err)
		}
		var got conn
		onlyB.srv.Do(http.MethodGet, "/connections/"+late.ID, nil).JSON(t, &got)
		if !got.HasSecret || got.SecretStatus != "undecryptable" || got.Usable || !got.Enabled {
			t.Fatalf("late under B: %+v", got)
		}
		var page struct {
			Connections []conn `json:"connections"`
		}
		onlyB.srv.Do(http.MethodGet, "/connections", nil).JSON(t, &page)
		if len(page.Connections) != 5 || page.Connections[0].Name != "late" || page.Connections[0].SecretStatus != "undecryptable" {
			t.Fatalf("list under B: %+v", page.Connections)
		}
		if _, err := onlyB.svc.Resolve(ctx, "late"); !errors.Is(err, connections.ErrConnectionUndecryptable) {
			t.Fatalf("resolve late under B: %v", err)
		}
		// Rotating with B alone cannot fix it: reported, left unchanged, others untouched.
		before := *onlyB.row(t, late.ID).Secret
		n, err = onlyB.svc.Rotate(ctx, ringB)
		if err == nil || n != 0 || !strings.Contains(err.Error(), late.ID) || *onlyB.row(t, late.ID).Secret != before {
			t.Fatalf("rotate with an undecryptable row: n=%d err=%v", n, err)
		}
		// Setting the secret again repairs it.
		onlyB.srv.Do(http.MethodPatch, "/connections/late", map[string]any{"secret": "s-late-2"}).JSON(t, &got)
		if got.SecretStatus != "ok" || !got.Usable {
			t.Fatalf("repair: %+v", got)
		}
	})
}

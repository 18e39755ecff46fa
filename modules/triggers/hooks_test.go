package triggers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
)

func hexMAC(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestWebhookSignatures(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		wh := b.create(t, webhookBody(secret1))
		body := []byte(`{"name": "Ada",  "n": 1}`)
		good := hexMAC([]byte(secret1), body)
		reserialised, _ := json.Marshal(map[string]any{"name": "Ada", "n": 1})
		cases := []struct {
			name    string
			body    []byte
			headers []string
			status  int
			code    string
		}{
			{"sha256= prefix", body, []string{SignatureHeader + ": sha256=" + good}, 202, ""},
			{"bare hex", body, []string{SignatureHeader + ": " + good}, 202, ""},
			{"uppercase hex", body, []string{SignatureHeader + ": " + strings.ToUpper(good)}, 202, ""},
			{"uppercase prefix", body, []string{SignatureHeader + ": SHA256=" + good}, 202, ""},
			{"lower-case header name", body, []string{"x-service-signature: sha256=" + good}, 202, ""},
			{"missing header", body, nil, 401, "invalid_signature"},
			{"empty header", body, []string{SignatureHeader + ": "}, 401, "invalid_signature"},
			{"wrong key", body, []string{SignatureHeader + ": sha256=" + hexMAC([]byte("another-key-of-enough-length"), body)}, 401, "invalid_signature"},
			{"re-serialised body", reserialised, []string{SignatureHeader + ": sha256=" + good}, 401, "invalid_signature"},
			{"truncated digest", body, []string{SignatureHeader + ": sha256=" + good[:62]}, 401, "invalid_signature"},
			{"digest with trailing junk", body, []string{SignatureHeader + ": sha256=" + good + "00"}, 401, "invalid_signature"},
			{"not hex", body, []string{SignatureHeader + ": sha256=" + strings.Repeat("zz", 32)}, 401, "invalid_signature"},
			{"other algorithm prefix", body, []string{SignatureHeader + ": sha1=" + good}, 401, "invalid_signature"},
			{"signature of the secret itself", body, []string{SignatureHeader + ": " + secret1}, 401, "invalid_signature"},
		}
		for _, c := range cases {
			r := b.srv.Do("POST", "/hooks/"+wh.ID, c.body, c.headers...)
			if r.Status != c.status || r.ErrorCode() != c.code {
				t.Errorf("%s: got %d %s, want %d %q", c.name, r.Status, r.Body, c.status, c.code)
			}
			if c.status == 202 {
				var out HookResponse
				r.JSON(t, &out)
				if out.RunID == "" {
					t.Errorf("%s: no run_id: %s", c.name, r.Body)
				}
			}
		}
		runs := b.runs.all()
		if len(runs) != 5 {
			t.Fatalf("accepted deliveries started %d runs, want 5", len(runs))
		}
		for _, r := range runs {
			if r.TriggerID != wh.ID || r.AgentID != "greeter" || r.Version != "1" || r.ContentHash != "" || string(r.Input) != string(body) {
				t.Fatalf("run request: %+v (input %s)", r, r.Input)
			}
		}
	})
}

func TestWebhookCheckOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		wh := b.create(t, map[string]any{"agent_id": "greeter", "kind": "webhook", "content_hash": hashV1, "config": map[string]any{"secret": secret1}})
		sch := b.create(t, scheduleBody("*/5 * * * *", nil))
		sig := func(body string) string { return SignatureHeader + ": sha256=" + hexMAC([]byte(secret1), []byte(body)) }
		bad := SignatureHeader + ": sha256=" + strings.Repeat("00", 32)
		expect := func(name, id, body string, header string, status int, code string) {
			t.Helper()
			var hs []string
			if header != "" {
				hs = []string{header}
			}
			r := b.srv.Do("POST", "/hooks/"+id, body, hs...)
			if r.Status != status || r.ErrorCode() != code {
				t.Errorf("%s: got %d %s, want %d %q", name, r.Status, r.Body, status, code)
			}
		}
		expect("unknown id", "trg_"+strings.Repeat("0", 32), `{}`, sig(`{}`), 404, "trigger_not_found")
		expect("malformed id", "nope", `{}`, sig(`{}`), 404, "trigger_not_found")
		expect("schedule trigger", sch.ID, `{}`, sig(`{}`), 404, "trigger_not_found")
		expect("not JSON, bad signature", wh.ID, `not json`, bad, 401, "invalid_signature")
		expect("not JSON, signed", wh.ID, `not json`, sig(`not json`), 400, "invalid_request")
		expect("empty body, signed", wh.ID, ``, sig(``), 400, "invalid_request")
		expect("truncated JSON, signed", wh.ID, `{"a":`, sig(`{"a":`), 400, "invalid_request")
		expect("invalid UTF-8, signed", wh.ID, "{\"a\":\"\xff\"}", sig("{\"a\":\"\xff\"}"), 400, "invalid_request")

		if r := b.srv.Do("PATCH", "/triggers/"+wh.ID, `{"enabled":false}`); r.Status != 200 {
			t.Fatalf("disable: %d", r.Status)
		}
		// A caller without the secret cannot tell a disabled trigger from an enabled one.
		expect("disabled, bad signature", wh.ID, `{}`, bad, 401, "invalid_signature")
		expect("disabled, no signature", wh.ID, `{}`, "", 401, "invalid_signature")
		expect("disabled, signed", wh.ID, `{}`, sig(`{}`), 409, "trigger_disabled")
		expect("disabled, signed, not JSON", wh.ID, `x`, sig(`x`), 409, "trigger_disabled")
		if n := len(b.runs.all()); n != 0 {
			t.Fatalf("refused deliveries started %d runs", n)
		}

		if r := b.srv.Do("PATCH", "/triggers/"+wh.ID, `{"enabled":true}`); r.Status != 200 {
			t.Fatalf("enable: %d", r.Status)
		}
		expect("enabled again", wh.ID, `[1,2]`, sig(`[1,2]`), 202, "")
		runs := b.runs.all()
		if len(runs) != 1 || runs[0].ContentHash != hashV1 || runs[0].Version != "" || string(runs[0].Input) != `[1,2]` {
			t.Fatalf("runs: %+v", runs)
		}

		// A refusal of the run (e.g. durable mode turned off since) reaches the caller as is.
		b.runs.fail(apperr.BadRequest("durable_required", "needs durable mode"))
		expect("run refused", wh.ID, `{}`, sig(`{}`), 400, "durable_required")

		if r := b.srv.Do("DELETE", "/triggers/"+wh.ID, nil); r.Status != 204 {
			t.Fatalf("delete: %d", r.Status)
		}
		expect("deleted", wh.ID, `{}`, sig(`{}`), 404, "trigger_not_found")
	})
}

// TestWebhookUndecryptableSecret: a key removed from SERVICE_SECRET_KEY is a server-side
// problem, reported as such and never as a bad signature.
func TestWebhookUndecryptableSecret(t *testing.T) {
	db := dbtest.Open(t, database.SQLite)
	b := setup(t, db, setupOpts{})
	wh := b.create(t, webhookBody(secret1))
	// Move the ciphertext to another row: the aad binding refuses it there.
	other := b.create(t, webhookBody("second-secret-for-another-row"))
	var ct string
	if err := db.Raw("SELECT secret FROM triggers WHERE id = ?", wh.ID).Scan(&ct).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("UPDATE triggers SET secret = ? WHERE id = ?", ct, other.ID).Error; err != nil {
		t.Fatal(err)
	}
	r := b.srv.Do("POST", "/hooks/"+other.ID, `{}`, SignatureHeader+": "+Sign([]byte(secret1), []byte(`{}`)))
	if r.Status != 503 || r.ErrorCode() != "trigger_secret_unavailable" {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	if strings.Contains(b.logs.String(), secret1) {
		t.Fatal("secret in logs")
	}
}

func TestSecretStoredEncrypted(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		wh := b.create(t, webhookBody(secret1))
		var config, secret string
		if err := db.Raw("SELECT config, secret FROM triggers WHERE id = ?", wh.ID).Row().Scan(&config, &secret); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(config, secret1) || strings.Contains(secret, secret1) || !strings.HasPrefix(secret, "v1:") {
			t.Fatalf("stored: config %q secret %q", config, secret)
		}
	})
}

func TestParseSignature(t *testing.T) {
	mac := hexMAC([]byte("k"), []byte("b"))
	for _, v := range []string{mac, "sha256=" + mac, "Sha256=" + strings.ToUpper(mac), "  sha256=" + mac + " "} {
		if _, ok := parseSignature(v); !ok {
			t.Errorf("%q refused", v)
		}
		if !verifySignature([]byte("k"), []byte("b"), v) {
			t.Errorf("%q does not verify", v)
		}
	}
	for _, v := range []string{"", "sha256=", "sha256", mac[:63], mac + "0", "sha512=" + mac, "sha256=sha256=" + mac, "0x" + mac[2:]} {
		if _, ok := parseSignature(v); ok {
			t.Errorf("%q accepted", v)
		}
	}
}

// FuzzVerifySignature: any header value either verifies exactly when it encodes the right
// MAC, or is refused; never a panic.
func FuzzVerifySignature(f *testing.F) {
	body := []byte(`{"a":1}`)
	mac := hexMAC([]byte(secret1), body)
	for _, s := range []string{mac, "sha256=" + mac, strings.ToUpper(mac), "", "sha256=", "zz", "sha256=" + mac[:10], "\x00\xff"} {
		f.Add(s, body)
	}
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		ok := verifySignature([]byte(secret1), body, header)
		want := hexMAC([]byte(secret1), body)
		v := strings.ToLower(strings.TrimSpace(header))
		v = strings.TrimPrefix(v, "sha256=")
		if ok != (v == want) {
			t.Fatalf("header %q body %q: verified=%v", header, body, ok)
		}
	})
}

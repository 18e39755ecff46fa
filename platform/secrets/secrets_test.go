package secrets_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/svc-dev/svc/platform/secrets"
)

func newRawKey(t testing.TB) []byte {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t testing.TB, s string) *secrets.Keyring {
	t.Helper()
	kr, err := secrets.ParseKeys(s)
	if err != nil {
		t.Fatalf("ParseKeys: %v", err)
	}
	return kr
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	kr := mustParse(t, base64.StdEncoding.EncodeToString(newRawKey(t)))
	aad := []byte("connections/c_1")
	for _, plain := range [][]byte{[]byte("hunter2"), {}, bytes.Repeat([]byte{0xff}, 4096)} {
		ct, err := kr.Encrypt(plain, aad)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ct, "v1:"+kr.PrimaryID()+":") {
			t.Fatalf("ciphertext %q does not name the primary key", ct)
		}
		if len(plain) > 0 && strings.Contains(ct, string(plain)) {
			t.Fatal("plaintext visible in ciphertext")
		}
		got, err := kr.Decrypt(ct, aad)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("round trip got %q", got)
		}
		if kr.NeedsRotation(ct) {
			t.Fatal("fresh ciphertext reported as needing rotation")
		}
	}
	a, _ := kr.Encrypt([]byte("same"), aad)
	b, _ := kr.Encrypt([]byte("same"), aad)
	if a == b {
		t.Fatal("two encryptions are identical: nonce reused")
	}
}

func TestKeyFormats(t *testing.T) {
	t.Parallel()
	raw := newRawKey(t)
	want := mustParse(t, hex.EncodeToString(raw)).PrimaryID()
	for name, enc := range map[string]string{
		"hex":         hex.EncodeToString(raw),
		"HEX":         strings.ToUpper(hex.EncodeToString(raw)),
		"std":         base64.StdEncoding.EncodeToString(raw),
		"std-raw":     base64.RawStdEncoding.EncodeToString(raw),
		"url":         base64.URLEncoding.EncodeToString(raw),
		"url-raw":     base64.RawURLEncoding.EncodeToString(raw),
		"with spaces": "  " + hex.EncodeToString(raw) + " ",
	} {
		kr, err := secrets.ParseKeys(enc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if kr.PrimaryID() != want {
			t.Fatalf("%s: id %s, want %s (id must depend on the key bytes only)", name, kr.PrimaryID(), want)
		}
	}
}

func TestBadKeys(t *testing.T) {
	t.Parallel()
	good := base64.StdEncoding.EncodeToString(newRawKey(t))
	short := base64.StdEncoding.EncodeToString(newRawKey(t)[:16])
	notHex := strings.Repeat("zz", 32)
	zeros := hex.EncodeToString(make([]byte, 32))
	cases := []struct {
		name, in, wantPos string
		secret            string // must not appear in the error
	}{
		{"empty", "", "no key", ""},
		{"blank", "   ", "no key", ""},
		{"short", short, "entry 1 of 1", short},
		{"not hex", notHex, "entry 1 of 1", notHex},
		{"garbage", "correct horse battery staple", "entry 1 of 1", "horse"},
		{"zeros", zeros, "entry 1 of 1", zeros},
		{"second bad", good + "," + short, "entry 2 of 2", short},
		{"empty entry", good + ",", "entry 2 of 2", ""},
		{"duplicate", good + "," + good, "entry 2 of 2 repeats entry 1", ""},
	}
	for _, tc := range cases {
		_, err := secrets.ParseKeys(tc.in)
		if !errors.Is(err, secrets.ErrInvalidKey) {
			t.Fatalf("%s: err %v, want ErrInvalidKey", tc.name, err)
		}
		if !strings.Contains(err.Error(), tc.wantPos) {
			t.Fatalf("%s: %q does not say %q", tc.name, err, tc.wantPos)
		}
		if strings.Contains(err.Error(), good) || (tc.secret != "" && strings.Contains(err.Error(), tc.secret)) {
			t.Fatalf("%s: error echoes the key: %q", tc.name, err)
		}
	}
}

// TestRotation follows the operator's procedure: write under A; restart with "B,A": old
// values still read and new writes use B; after re-encryption, restart with B alone.
func TestRotation(t *testing.T) {
	t.Parallel()
	a := hex.EncodeToString(newRawKey(t))
	b := base64.RawURLEncoding.EncodeToString(newRawKey(t))
	aad := []byte("row-1")

	ringA := mustParse(t, a)
	oldCT, err := ringA.Encrypt([]byte("token-A"), aad)
	if err != nil {
		t.Fatal(err)
	}

	ringBA := mustParse(t, b+", "+a)
	if got, err := ringBA.Decrypt(oldCT, aad); err != nil || string(got) != "token-A" {
		t.Fatalf("B,A cannot read A's secret: %q %v", got, err)
	}
	if !ringBA.NeedsRotation(oldCT) {
		t.Fatal("A's ciphertext not flagged for rotation under B,A")
	}
	newCT, err := ringBA.Encrypt([]byte("token-B"), aad)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := secrets.KeyID(newCT); id != ringBA.PrimaryID() || ringBA.NeedsRotation(newCT) {
		t.Fatalf("new write under key %s, want B (%s)", id, ringBA.PrimaryID())
	}
	rotated, err := ringBA.Rotate(oldCT, aad)
	if err != nil || ringBA.NeedsRotation(rotated) {
		t.Fatalf("Rotate: %v", err)
	}
	if same, _ := ringBA.Rotate(newCT, aad); same != newCT {
		t.Fatal("Rotate re-encrypted a value already under the primary key")
	}

	ringB := mustParse(t, b)
	if _, err := ringB.Decrypt(oldCT, aad); !errors.Is(err, secrets.ErrUnknownKey) {
		t.Fatalf("B alone on A's ciphertext: %v, want ErrUnknownKey", err)
	}
	for _, ct := range []string{newCT, rotated} {
		if _, err := ringB.Decrypt(ct, aad); err != nil {
			t.Fatalf("B alone cannot read B's ciphertext: %v", err)
		}
	}
	// The id comes from the key, not its position: "A,B" still reads B's ciphertext.
	if _, err := mustParse(t, a+","+b).Decrypt(newCT, aad); err != nil {
		t.Fatalf("reordered ring: %v", err)
	}
}

func TestAADBinding(t *testing.T) {
	t.Parallel()
	kr := secrets.Ephemeral()
	ct, _ := kr.Encrypt([]byte("s3cr3t"), []byte("connections/c_1"))
	for _, aad := range [][]byte{[]byte("connections/c_2"), nil} {
		_, err := kr.Decrypt(ct, aad)
		if !errors.Is(err, secrets.ErrDecrypt) {
			t.Fatalf("aad %q: err %v, want ErrDecrypt", aad, err)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Fatal("error contains the plaintext")
		}
	}
}

func TestTamper(t *testing.T) {
	t.Parallel()
	kr := secrets.Ephemeral()
	aad := []byte("x")
	ct, _ := kr.Encrypt([]byte("payload"), aad)
	body := ct[strings.LastIndex(ct, ":")+1:]
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	prefix := ct[:len(ct)-len(body)]
	for i := range raw {
		bad := bytes.Clone(raw)
		bad[i] ^= 0x01
		if _, err := kr.Decrypt(prefix+base64.RawURLEncoding.EncodeToString(bad), aad); !errors.Is(err, secrets.ErrDecrypt) {
			t.Fatalf("flipped byte %d: err %v, want ErrDecrypt", i, err)
		}
	}
	for _, s := range []string{"", "v1", "v1::", "v2:" + kr.PrimaryID() + ":" + body, prefix, prefix + "!!!", prefix + body[:10], "v1:" + strings.ToUpper(kr.PrimaryID()) + ":" + body} {
		if _, err := kr.Decrypt(s, aad); !errors.Is(err, secrets.ErrDecrypt) {
			t.Fatalf("%q: err %v, want ErrDecrypt", s, err)
		}
	}
	if !kr.NeedsRotation("garbage") {
		t.Fatal("malformed value should need attention")
	}
	if _, err := secrets.KeyID("garbage"); !errors.Is(err, secrets.ErrDecrypt) {
		t.Fatalf("KeyID(garbage) = %v", err)
	}
}

func TestEphemeral(t *testing.T) {
	t.Parallel()
	a, b := secrets.Ephemeral(), secrets.Ephemeral()
	if !a.IsEphemeral() || a.PrimaryID() == b.PrimaryID() {
		t.Fatal("ephemeral keys must be flagged and random")
	}
	if mustParse(t, hex.EncodeToString(newRawKey(t))).IsEphemeral() {
		t.Fatal("parsed ring flagged ephemeral")
	}
	ct, _ := a.Encrypt([]byte("v"), nil)
	if _, err := b.Decrypt(ct, nil); !errors.Is(err, secrets.ErrUnknownKey) {
		t.Fatalf("other ephemeral ring: %v", err)
	}
}

func FuzzDecrypt(f *testing.F) {
	kr := mustParse(f, strings.Repeat("ab", 32))
	good, _ := kr.Encrypt([]byte("seed"), []byte("aad"))
	for _, s := range []string{good, "", "v1:", "v1:" + kr.PrimaryID() + ":", "v1:" + kr.PrimaryID() + ":AAAA", "v1:0000000000000000:AAAA", good + "=", strings.Replace(good, "v1", "v0", 1), "::::"} {
		f.Add(s, []byte("aad"))
	}
	f.Fuzz(func(t *testing.T, s string, aad []byte) {
		plain, err := kr.Decrypt(s, aad)
		if err == nil {
			// Only a genuine ciphertext for this aad may open; re-sealing must round-trip.
			ct, err := kr.Encrypt(plain, aad)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := kr.Decrypt(ct, aad); err != nil || !bytes.Equal(back, plain) {
				t.Fatalf("re-seal round trip failed: %v", err)
			}
			return
		}
		if !errors.Is(err, secrets.ErrDecrypt) && !errors.Is(err, secrets.ErrUnknownKey) {
			t.Fatalf("unexpected error class: %v", err)
		}
		_ = kr.NeedsRotation(s)
	})
}

func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{"", ",", strings.Repeat("ab", 32), base64.StdEncoding.EncodeToString(make([]byte, 32)), "a,b,c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kr, err := secrets.ParseKeys(s)
		if err != nil {
			if !errors.Is(err, secrets.ErrInvalidKey) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		ct, err := kr.Encrypt([]byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kr.Decrypt(ct, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// Package secrets encrypts stored credentials with AES-256-GCM under a keyring.
//
// # Key format
//
// SERVICE_SECRET_KEY is a comma-separated list of keys. Each key is 32 random bytes written
// either as 64 hex characters or as base64 (standard or URL alphabet, padded or not), e.g.
// the output of `openssl rand -base64 32` or `openssl rand -hex 32`. Spaces around entries
// are ignored. The first key encrypts; every key decrypts, which is how keys are rotated:
// put the new key first, re-encrypt (svc secrets rotate), then drop the old key.
//
// # Ciphertext format
//
// Encrypt returns "v1:<keyid>:<base64url(nonce|ciphertext|tag)>" where keyid is the first
// 8 bytes, in hex, of SHA-256("svc-key-id:" + key). The id depends on the key alone, so
// reordering the list never breaks decryption. The caller's associated data (typically the
// table and row id) is authenticated but not stored: a ciphertext copied to another row
// fails to decrypt.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Errors carry no key material and no plaintext.
var (
	// ErrInvalidKey means a SERVICE_SECRET_KEY entry is malformed.
	ErrInvalidKey = errors.New("secrets: invalid key")
	// ErrUnknownKey means the ciphertext was made with a key that is not in the ring.
	ErrUnknownKey = errors.New("secrets: ciphertext key is not in the keyring")
	// ErrDecrypt means the ciphertext is malformed, tampered with, or bound to other data.
	ErrDecrypt = errors.New("secrets: cannot decrypt")
)

const (
	version  = "v1"
	keySize  = 32
	idPrefix = "svc-key-id:"
)

type key struct {
	id   string
	aead cipher.AEAD
}

// Keyring holds the keys; the first (primary) encrypts and all decrypt. Safe for concurrent use.
type Keyring struct {
	keys      []key // keys[0] is the primary
	ephemeral bool
}

// ParseKeys parses a SERVICE_SECRET_KEY value (see the package doc for the format). Errors
// name the bad entry by its 1-based position and never echo it.
func ParseKeys(s string) (*Keyring, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: no key given", ErrInvalidKey)
	}
	entries := strings.Split(s, ",")
	kr := &Keyring{}
	seen := map[string]int{}
	for i, entry := range entries {
		pos := i + 1
		raw, err := decodeKey(strings.TrimSpace(entry))
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d of %d: %s", ErrInvalidKey, pos, len(entries), err.Error())
		}
		k, err := newKey(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d of %d: %s", ErrInvalidKey, pos, len(entries), err.Error())
		}
		if first, dup := seen[k.id]; dup {
			return nil, fmt.Errorf("%w: entry %d of %d repeats entry %d", ErrInvalidKey, pos, len(entries), first)
		}
		seen[k.id] = pos
		kr.keys = append(kr.keys, k)
	}
	return kr, nil
}

// decodeKey accepts 64 hex characters or base64 of 32 bytes; its errors describe the shape
// only, never the content.
func decodeKey(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	if len(s) == 2*keySize { // base64 of 32 bytes is 43 or 44 characters, so this is meant as hex
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%d characters but not hex", len(s))
		}
		return checkKey(b)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != keySize {
				return nil, fmt.Errorf("decodes to %d bytes, want %d", len(b), keySize)
			}
			return checkKey(b)
		}
	}
	return nil, fmt.Errorf("neither 64 hex characters nor base64 of %d bytes", keySize)
}

func checkKey(b []byte) ([]byte, error) {
	for _, c := range b {
		if c != 0 {
			return b, nil
		}
	}
	return nil, errors.New("key is all zeros")
}

func newKey(raw []byte) (key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, err
	}
	return key{id: keyID(raw), aead: aead}, nil
}

func keyID(raw []byte) string {
	sum := sha256.Sum256(append([]byte(idPrefix), raw...))
	return hex.EncodeToString(sum[:8])
}

// Ephemeral returns a keyring with one random key, for when SERVICE_SECRET_KEY is unset;
// secrets it encrypts do not survive a restart, so the caller should log a warning.
func Ephemeral() *Keyring {
	raw := make([]byte, keySize)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails (it panics on a broken OS source)
	k, err := newKey(raw)
	if err != nil {
		panic(err) // unreachable: the key size is fixed
	}
	return &Keyring{keys: []key{k}, ephemeral: true}
}

// IsEphemeral reports whether the ring was made by Ephemeral.
func (kr *Keyring) IsEphemeral() bool { return kr.ephemeral }

// PrimaryID is the key id that Encrypt uses.
func (kr *Keyring) PrimaryID() string { return kr.keys[0].id }

// IDs lists every key id in the ring, primary first.
func (kr *Keyring) IDs() []string {
	ids := make([]string, len(kr.keys))
	for i, k := range kr.keys {
		ids[i] = k.id
	}
	return ids
}

// Encrypt seals plaintext under the primary key, authenticating aad (which is not stored).
func (kr *Keyring) Encrypt(plaintext, aad []byte) (string, error) {
	k := kr.keys[0]
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plaintext)+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secrets: nonce: %w", err)
	}
	sealed := k.aead.Seal(nonce, nonce, plaintext, aad)
	return version + ":" + k.id + ":" + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// Decrypt opens a string made by Encrypt with the same aad. It returns ErrUnknownKey when
// the key id is not in the ring and ErrDecrypt when the string is malformed, tampered with,
// or was sealed with other associated data.
func (kr *Keyring) Decrypt(s string, aad []byte) ([]byte, error) {
	id, body, err := split(s)
	if err != nil {
		return nil, err
	}
	k, ok := kr.find(id)
	if !ok {
		return nil, fmt.Errorf("%w (key id %s)", ErrUnknownKey, id)
	}
	sealed, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(sealed) < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, fmt.Errorf("%w: malformed ciphertext", ErrDecrypt)
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed (tampered, or bound to other data)", ErrDecrypt)
	}
	return plain, nil
}

// Rotate re-encrypts s under the primary key when NeedsRotation says so, and returns s
// unchanged otherwise; it fails like Decrypt.
func (kr *Keyring) Rotate(s string, aad []byte) (string, error) {
	plain, err := kr.Decrypt(s, aad)
	if err != nil {
		return "", err
	}
	if !kr.NeedsRotation(s) {
		return s, nil
	}
	return kr.Encrypt(plain, aad)
}

// NeedsRotation reports whether s was not sealed under the primary key (a malformed s also
// needs attention, so it reports true).
func (kr *Keyring) NeedsRotation(s string) bool {
	id, err := KeyID(s)
	return err != nil || id != kr.keys[0].id
}

// KeyID returns the key id a ciphertext names, without decrypting it.
func KeyID(s string) (string, error) {
	id, _, err := split(s)
	return id, err
}

func (kr *Keyring) find(id string) (key, bool) {
	for _, k := range kr.keys {
		if k.id == id {
			return k, true
		}
	}
	return key{}, false
}

// split checks the "v1:<16 hex>:<body>" frame.
func split(s string) (id, body string, err error) {
	v, rest, ok1 := strings.Cut(s, ":")
	id, body, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || v != version || len(id) != 16 || !isLowerHex(id) || body == "" {
		return "", "", fmt.Errorf("%w: not a %s ciphertext", ErrDecrypt, version)
	}
	return id, body, nil
}

func isLowerHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

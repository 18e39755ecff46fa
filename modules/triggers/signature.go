package triggers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// SignatureHeader carries the webhook signature.
const SignatureHeader = "X-Service-Signature"

// Sign returns the signature of body under secret in the sha256=<hex> form.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// parseSignature reads a header value: "sha256=<hex>" (prefix case-insensitive) or bare
// hex, either case, 64 digits. Surrounding spaces are ignored.
func parseSignature(v string) ([]byte, bool) {
	v = strings.TrimSpace(v)
	if len(v) > 7 && strings.EqualFold(v[:7], "sha256=") {
		v = v[7:]
	}
	if len(v) != 2*sha256.Size {
		return nil, false
	}
	b, err := hex.DecodeString(v)
	if err != nil {
		return nil, false
	}
	return b, true
}

// verifySignature reports whether header is a valid signature of body under secret,
// comparing the MACs in constant time.
func verifySignature(secret, body []byte, header string) bool {
	got, ok := parseSignature(header)
	if !ok {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

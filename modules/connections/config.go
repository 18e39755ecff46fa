package connections

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/svc-dev/svc/platform/apperr"
)

// Connection kinds.
const (
	KindHTTPAuth  = "http_auth"
	KindMCPServer = "mcp_server"
)

// http_auth config types: how the secret is applied to an outgoing request.
const (
	AuthHeader = "header" // header: <header>: [<scheme> ]<secret>
	AuthBasic  = "basic"  // basic: Authorization: Basic base64(<username>:<secret>)
	AuthQuery  = "query"  // query: ?<param>=<secret>
)

// DefaultHeader and DefaultScheme apply when a header-based config names neither.
const (
	DefaultHeader = "Authorization"
	DefaultScheme = "Bearer"
)

var (
	namePattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	serverPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	envPattern    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	// tokenPattern is an RFC 9110 token: header names and auth schemes.
	tokenPattern = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]{1,64}$")
)

// forbiddenHeaders are set by the HTTP client itself or are hop-by-hop: a credential there
// would be dropped or corrupt the request.
var forbiddenHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Keep-Alive": true, "Proxy-Connection": true,
}

// secretLike lists substrings of config keys that look like they carry a secret; such keys
// are redacted in every response, and on input they are refused with a hint to use secret.
var secretLike = []string{"token", "password", "passwd", "secret", "key", "authorization", "credential", "auth", "bearer", "cookie", "session", "private", "signature"}

// IsSecretLikeKey reports whether a config key looks like it names a secret value.
func IsSecretLikeKey(k string) bool {
	k = strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "").Replace(k))
	for _, s := range secretLike {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// Redact returns a copy of a config with the values of secret-like keys (at any depth)
// replaced by "***". Stored configs never hold such keys (validation refuses them), so this
// is the last line of defence, not the first.
func Redact(cfg map[string]any) map[string]any {
	out := make(map[string]any, len(cfg))
	for k, v := range cfg {
		if IsSecretLikeKey(k) {
			out[k] = "***"
			continue
		}
		if m, ok := v.(map[string]any); ok {
			v = Redact(m)
		}
		out[k] = v
	}
	return out
}

// invalid is a 400 naming the offending field; it never echoes a value.
func invalid(field, format string, args ...any) *apperr.Error {
	return apperr.Invalid("%s: %s", field, fmt.Sprintf(format, args...)).WithDetails(map[string]any{"field": field})
}

// ValidName reports whether a connection name is acceptable: letters, digits, '_', '.', '-',
// up to 64 characters, not starting with "con_" (so a path segment is never ambiguous
// between an id and a name).
func ValidName(name string) bool {
	return namePattern.MatchString(name) && !strings.HasPrefix(name, idPrefix)
}

// normalizeConfig validates a raw config for kind and returns its canonical form, with the
// defaults filled in, ready to store.
func normalizeConfig(kind string, raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("config", "is required (a JSON object)")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, invalid("config", "must be a JSON object")
	}
	str := map[string]string{}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys) // report the same first problem every time
	for _, k := range keys {
		var s string
		if err := json.Unmarshal(obj[k], &s); err != nil {
			if IsSecretLikeKey(k) {
				return nil, invalid("config."+k, "secrets do not belong in config: send the value as the top-level secret field, which is encrypted")
			}
			return nil, invalid("config."+k, "must be a string")
		}
		str[k] = s
	}
	switch kind {
	case KindHTTPAuth:
		return normalizeHTTPAuth(keys, str)
	case KindMCPServer:
		return normalizeMCPServer(keys, str)
	}
	return nil, invalid("kind", "must be %s or %s", KindHTTPAuth, KindMCPServer)
}

func allowOnly(keys []string, allowed ...string) error {
	for _, k := range keys {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if ok {
			continue
		}
		if IsSecretLikeKey(k) {
			return invalid("config."+k, "secrets do not belong in config: send the value as the top-level secret field, which is encrypted")
		}
		return invalid("config."+k, "unknown key (allowed: %s)", strings.Join(allowed, ", "))
	}
	return nil
}

func normalizeHTTPAuth(keys []string, c map[string]string) (map[string]any, error) {
	typ, ok := c["type"]
	if !ok {
		return nil, invalid("config.type", "is required: header, basic or query")
	}
	switch typ {
	case AuthHeader:
		if err := allowOnly(keys, "type", "header", "scheme"); err != nil {
			return nil, err
		}
		header, scheme, err := headerAndScheme(c)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": AuthHeader, "header": header, "scheme": scheme}, nil
	case AuthBasic:
		if err := allowOnly(keys, "type", "username"); err != nil {
			return nil, err
		}
		u := c["username"]
		if u == "" {
			return nil, invalid("config.username", "is required for basic authentication (the secret is the password)")
		}
		if len(u) > 256 || strings.Contains(u, ":") || hasControl(u) {
			return nil, invalid("config.username", "must be at most 256 characters without ':' or control characters")
		}
		return map[string]any{"type": AuthBasic, "username": u}, nil
	case AuthQuery:
		if err := allowOnly(keys, "type", "param"); err != nil {
			return nil, err
		}
		p := c["param"]
		if p == "" {
			return nil, invalid("config.param", "is required: the query parameter that carries the secret")
		}
		if len(p) > 128 || hasControl(p) {
			return nil, invalid("config.param", "must be at most 128 characters without control characters")
		}
		return map[string]any{"type": AuthQuery, "param": p}, nil
	}
	return nil, invalid("config.type", "must be header, basic or query")
}

func normalizeMCPServer(keys []string, c map[string]string) (map[string]any, error) {
	if err := allowOnly(keys, "server", "header", "scheme", "env"); err != nil {
		return nil, err
	}
	server := c["server"]
	if server == "" {
		return nil, invalid("config.server", "is required: the name of the registered tool server this connection authenticates")
	}
	if !serverPattern.MatchString(server) {
		return nil, invalid("config.server", "must be a tool server name: letters, digits, '_', '.', '-', up to 64 characters")
	}
	out := map[string]any{"server": server}
	if env, ok := c["env"]; ok {
		if _, h := c["header"]; h {
			return nil, invalid("config.env", "give either env (stdio servers) or header (HTTP servers), not both")
		}
		if _, s := c["scheme"]; s {
			return nil, invalid("config.scheme", "applies to header only, not env")
		}
		if !envPattern.MatchString(env) {
			return nil, invalid("config.env", "must be an environment variable name: letters, digits and '_', not starting with a digit")
		}
		out["env"] = env
		return out, nil
	}
	header, scheme, err := headerAndScheme(c)
	if err != nil {
		return nil, err
	}
	out["header"], out["scheme"] = header, scheme
	return out, nil
}

// headerAndScheme applies the defaults: header Authorization; scheme Bearer on Authorization,
// none on any other header. An explicit "" scheme sends the bare secret.
func headerAndScheme(c map[string]string) (string, string, error) {
	header := DefaultHeader
	if h, ok := c["header"]; ok {
		if !tokenPattern.MatchString(h) {
			return "", "", invalid("config.header", "must be an HTTP header name")
		}
		header = http.CanonicalHeaderKey(h)
		if forbiddenHeaders[header] {
			return "", "", invalid("config.header", "%s is managed by the HTTP client and cannot carry a credential", header)
		}
	}
	scheme := ""
	if header == DefaultHeader {
		scheme = DefaultScheme
	}
	if s, ok := c["scheme"]; ok {
		if s != "" && !tokenPattern.MatchString(s) {
			return "", "", invalid("config.scheme", "must be an authentication scheme such as Bearer or Token, or empty")
		}
		scheme = s
	}
	return header, scheme, nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// maxSecretBytes bounds a secret; tokens, keys and passwords are far smaller.
const maxSecretBytes = 16 << 10

// checkSecret refuses secrets that could never be applied safely. Messages never echo it.
func checkSecret(s string) error {
	if len(s) > maxSecretBytes {
		return invalid("secret", "must be at most %d bytes", maxSecretBytes)
	}
	if hasControl(s) {
		// CR/LF would split a header; no real token, key or password contains them.
		return invalid("secret", "must not contain control characters (line breaks, NUL, …)")
	}
	return nil
}

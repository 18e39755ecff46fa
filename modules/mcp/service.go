// Package mcp is the tool-server registry: MCP servers reached over stdio (a supervised child
// process) or streamable HTTP, registered by name, connected lazily, and called by the graph
// runtime's mcp tool nodes.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/secrets"
	"gorm.io/gorm"
)

// Transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Auth is what a connection contributes to a tool server: a header for HTTP transports, or
// environment variables for stdio ones.
type Auth struct {
	Header string
	Value  string
	Env    map[string]string
}

// Connections resolves a connection name to an Auth at call time (the connections module).
type Connections interface {
	ResolveMCP(ctx context.Context, name string) (Auth, error)
}

// Config is a registration, as written by PUT. Env and Headers values are write-only.
type Config struct {
	Transport  string            `json:"transport"`
	Command    string            `json:"command,omitempty"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	URL        string            `json:"url,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Connection string            `json:"connection,omitempty"`
	TimeoutMs  int               `json:"timeoutMs,omitempty"`
}

// Server is a registration as read back: environment and header values never appear.
type Server struct {
	Name       string    `json:"name"`
	Transport  string    `json:"transport"`
	Command    string    `json:"command,omitempty"`
	Args       []string  `json:"args,omitempty"`
	EnvKeys    []string  `json:"envKeys"`
	URL        string    `json:"url,omitempty"`
	HeaderKeys []string  `json:"headerKeys"`
	Connection string    `json:"connection,omitempty"`
	TimeoutMs  int       `json:"timeoutMs,omitempty"`
	State      string    `json:"state"` // idle | connected
	LastError  string    `json:"lastError,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// Tool is one tool a server offers.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	InputSchema any    `json:"inputSchema,omitempty"`
}

type row struct {
	Name         string `gorm:"primaryKey"`
	Transport    string
	Command      string
	Args         string
	URL          string `gorm:"column:url"`
	EnvSecret    *string
	HeaderSecret *string
	EnvKeys      string
	HeaderKeys   string
	Connection   string
	TimeoutMs    int
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func (row) TableName() string { return "mcp_servers" }

// session is a live client connection to one server.
type session struct {
	cs       *sdk.ClientSession
	lastUsed time.Time
}

// Service owns registrations and live sessions.
type Service struct {
	db    *database.DB
	keys  *secrets.Keyring
	conns Connections
	log   zerolog.Logger

	mu       sync.Mutex
	sessions map[string]*session
	lastErr  map[string]string
	// connecting serialises connects per server so concurrent callers share one session.
	connecting map[string]*sync.Mutex
}

// NewService builds the registry. conns may be nil (then servers cannot use connections).
func NewService(db *database.DB, keys *secrets.Keyring, conns Connections, log zerolog.Logger) *Service {
	return &Service{db: db, keys: keys, conns: conns, log: log,
		sessions: map[string]*session{}, lastErr: map[string]string{}, connecting: map[string]*sync.Mutex{}}
}

var (
	nameRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	envKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	headerRe = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_` + "`" + `|~-]{1,128}$`)
)

// ValidName reports whether name is a valid server name.
func ValidName(name string) bool { return nameRe.MatchString(name) }

func validate(name string, c *Config) error {
	bad := func(field, format string, args ...any) error {
		return ErrInvalidServer.Msg(format, args...).WithDetails(map[string]string{"field": field})
	}
	if !ValidName(name) {
		return bad("name", "name must match %s", nameRe.String())
	}
	switch c.Transport {
	case TransportStdio:
		if strings.TrimSpace(c.Command) == "" {
			return bad("command", "a stdio server needs a command")
		}
		if c.URL != "" || len(c.Headers) > 0 {
			return bad("url", "url and headers belong to http servers")
		}
	case TransportHTTP:
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("url", "an http server needs an http(s) url")
		}
		if c.Command != "" || len(c.Args) > 0 || len(c.Env) > 0 {
			return bad("command", "command, args and env belong to stdio servers")
		}
	default:
		return bad("transport", "transport must be %q or %q", TransportStdio, TransportHTTP)
	}
	for k := range c.Env {
		if !envKeyRe.MatchString(k) {
			return bad("env", "environment variable name %q is not valid", k)
		}
	}
	for k, v := range c.Headers {
		if !headerRe.MatchString(k) || strings.ContainsAny(v, "\r\n") {
			return bad("headers", "header %q is not valid", k)
		}
	}
	if c.Connection != "" && !nameRe.MatchString(c.Connection) {
		return bad("connection", "connection name is not valid")
	}
	if c.TimeoutMs < 0 || c.TimeoutMs > 600000 {
		return bad("timeoutMs", "timeoutMs must be from 0 to 600000")
	}
	if len(c.Args) > 256 {
		return bad("args", "at most 256 args")
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *Service) seal(name, what string, m map[string]string) (*string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	raw, _ := json.Marshal(m)
	ct, err := s.keys.Encrypt(raw, []byte("mcp:"+name+":"+what))
	if err != nil {
		return nil, err
	}
	return &ct, nil
}

func (s *Service) open(name, what string, ct *string) (map[string]string, error) {
	if ct == nil {
		return nil, nil
	}
	raw, err := s.keys.Decrypt(*ct, []byte("mcp:"+name+":"+what))
	if err != nil {
		return nil, ErrUnavailable.Msg("tool server %q: its stored %s cannot be decrypted with the configured SERVICE_SECRET_KEY; register it again", name, what)
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, apperr.ErrInternal.Wrap(err)
	}
	return m, nil
}

// Put registers or replaces a server; it reports whether it was created. A replaced server's
// live session is closed so the next call uses the new config.
func (s *Service) Put(ctx context.Context, name string, c Config) (Server, bool, error) {
	if err := validate(name, &c); err != nil {
		return Server{}, false, err
	}
	env, err := s.seal(name, "env", c.Env)
	if err != nil {
		return Server{}, false, apperr.ErrInternal.Wrap(err)
	}
	hdr, err := s.seal(name, "headers", c.Headers)
	if err != nil {
		return Server{}, false, apperr.ErrInternal.Wrap(err)
	}
	args, _ := json.Marshal(nonNil(c.Args))
	ek, _ := json.Marshal(sortedKeys(c.Env))
	hk, _ := json.Marshal(sortedKeys(c.Headers))
	now := time.Now().UTC()
	r := row{Name: name, Transport: c.Transport, Command: c.Command, Args: string(args), URL: c.URL,
		EnvSecret: env, HeaderSecret: hdr, EnvKeys: string(ek), HeaderKeys: string(hk),
		Connection: c.Connection, TimeoutMs: c.TimeoutMs, CreatedAt: now, UpdatedAt: now}
	created := false
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		var old row
		err := tx.First(&old, "name = ?", name).Error
		switch {
		case database.IsNotFound(err):
			created = true
			return tx.Create(&r).Error
		case err != nil:
			return err
		}
		r.CreatedAt = old.CreatedAt
		return tx.Save(&r).Error
	})
	if err != nil {
		return Server{}, false, err
	}
	s.Close(name)
	return s.view(r), created, nil
}

func nonNil(a []string) []string {
	if a == nil {
		return []string{}
	}
	return a
}

func (s *Service) find(ctx context.Context, name string) (row, error) {
	var r row
	if !ValidName(name) {
		return r, ErrServerNotFound.Msg("tool server %q is not registered", name)
	}
	err := s.db.WithContext(ctx).First(&r, "name = ?", name).Error
	if database.IsNotFound(err) {
		return r, ErrServerNotFound.Msg("tool server %q is not registered", name)
	}
	return r, err
}

// Get reads one registration.
func (s *Service) Get(ctx context.Context, name string) (Server, error) {
	r, err := s.find(ctx, name)
	if err != nil {
		return Server{}, err
	}
	return s.view(r), nil
}

// List returns every registration by name.
func (s *Service) List(ctx context.Context) ([]Server, error) {
	var rows []row
	if err := s.db.WithContext(ctx).Order("name").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]Server, 0, len(rows))
	for _, r := range rows {
		out = append(out, s.view(r))
	}
	return out, nil
}

// Delete closes the server's session and removes the registration.
func (s *Service) Delete(ctx context.Context, name string) error {
	if _, err := s.find(ctx, name); err != nil {
		return err
	}
	s.Close(name)
	return s.db.WithContext(ctx).Delete(&row{}, "name = ?", name).Error
}

func (s *Service) view(r row) Server {
	v := Server{Name: r.Name, Transport: r.Transport, Command: r.Command, URL: r.URL,
		Connection: r.Connection, TimeoutMs: r.TimeoutMs, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), State: "idle"}
	_ = json.Unmarshal([]byte(r.Args), &v.Args)
	_ = json.Unmarshal([]byte(r.EnvKeys), &v.EnvKeys)
	_ = json.Unmarshal([]byte(r.HeaderKeys), &v.HeaderKeys)
	if v.EnvKeys == nil {
		v.EnvKeys = []string{}
	}
	if v.HeaderKeys == nil {
		v.HeaderKeys = []string{}
	}
	s.mu.Lock()
	if _, ok := s.sessions[r.Name]; ok {
		v.State = "connected"
	}
	v.LastError = s.lastErr[r.Name]
	s.mu.Unlock()
	return v
}

// headerTransport adds fixed headers to every request of an HTTP MCP client.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// session returns the live session of a server, connecting on first use.
func (s *Service) session(ctx context.Context, name string) (*sdk.ClientSession, time.Duration, error) {
	r, err := s.find(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	timeout := 30 * time.Second
	if r.TimeoutMs > 0 {
		timeout = time.Duration(r.TimeoutMs) * time.Millisecond
	}
	s.mu.Lock()
	lock := s.connecting[name]
	if lock == nil {
		lock = &sync.Mutex{}
		s.connecting[name] = lock
	}
	s.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()
	s.mu.Lock()
	if ss, ok := s.sessions[name]; ok {
		ss.lastUsed = time.Now()
		s.mu.Unlock()
		return ss.cs, timeout, nil
	}
	s.mu.Unlock()

	env, err := s.open(name, "env", r.EnvSecret)
	if err != nil {
		return nil, 0, err
	}
	headers, err := s.open(name, "headers", r.HeaderSecret)
	if err != nil {
		return nil, 0, err
	}
	if r.Connection != "" {
		if s.conns == nil {
			return nil, 0, ErrUnavailable.Msg("tool server %q uses connection %q but connections are not available", name, r.Connection)
		}
		auth, err := s.conns.ResolveMCP(ctx, r.Connection)
		if err != nil {
			return nil, 0, err
		}
		if env == nil {
			env = map[string]string{}
		}
		for k, v := range auth.Env {
			env[k] = v
		}
		if auth.Header != "" {
			if headers == nil {
				headers = map[string]string{}
			}
			headers[auth.Header] = auth.Value
		}
	}
	var transport sdk.Transport
	switch r.Transport {
	case TransportStdio:
		var args []string
		_ = json.Unmarshal([]byte(r.Args), &args)
		// The child outlives this request: it is bound to the service, not to ctx.
		cmd := exec.Command(r.Command, args...)
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	default:
		transport = &sdk.StreamableClientTransport{
			Endpoint:   r.URL,
			HTTPClient: &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: headers}},
			MaxRetries: -1,
		}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "svc", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cs, err := client.Connect(cctx, transport, nil)
	if err != nil {
		msg := fmt.Sprintf("tool server %q is unreachable: %s", name, scrub(err.Error(), env, headers))
		s.mu.Lock()
		s.lastErr[name] = msg
		s.mu.Unlock()
		return nil, 0, ErrUnavailable.Msg("%s", msg)
	}
	s.mu.Lock()
	s.sessions[name] = &session{cs: cs, lastUsed: time.Now()}
	delete(s.lastErr, name)
	s.mu.Unlock()
	return cs, timeout, nil
}

// scrub removes secret values from an error text.
func scrub(msg string, maps ...map[string]string) string {
	for _, m := range maps {
		for _, v := range m {
			if len(v) >= 4 {
				msg = strings.ReplaceAll(msg, v, "***")
			}
		}
	}
	if len(msg) > 300 {
		msg = msg[:300]
	}
	return msg
}

// Warm connects (starting the process of a stdio server).
func (s *Service) Warm(ctx context.Context, name string) (Server, error) {
	if _, _, err := s.session(ctx, name); err != nil {
		return Server{}, err
	}
	return s.Get(ctx, name)
}

// Close ends a server's session (stopping its process); a no-op when idle.
func (s *Service) Close(name string) {
	s.mu.Lock()
	ss := s.sessions[name]
	delete(s.sessions, name)
	s.mu.Unlock()
	if ss != nil {
		_ = ss.cs.Close()
	}
}

// Stop closes every session (service shutdown).
func (s *Service) Stop(context.Context) error {
	s.mu.Lock()
	names := make([]string, 0, len(s.sessions))
	for n := range s.sessions {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		s.Close(n)
	}
	return nil
}

// Start implements httpx.Starter (sessions are lazy; nothing to start).
func (s *Service) Start(context.Context) error { return nil }

// Tools lists a server's tools, connecting lazily.
func (s *Service) Tools(ctx context.Context, name string) ([]Tool, error) {
	cs, timeout, err := s.session(ctx, name)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := []Tool{}
	for t, err := range cs.Tools(cctx, nil) {
		if err != nil {
			s.dropBroken(name, cs)
			return nil, ErrUnavailable.Msg("tool server %q: listing tools failed: %s", name, trim(err.Error()))
		}
		out = append(out, Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return out, nil
}

// dropBroken forgets a session that failed, so the next call reconnects.
func (s *Service) dropBroken(name string, cs *sdk.ClientSession) {
	s.mu.Lock()
	if ss, ok := s.sessions[name]; ok && ss.cs == cs {
		delete(s.sessions, name)
	}
	s.mu.Unlock()
	_ = cs.Close()
}

func trim(s string) string {
	if len(s) > 300 {
		return s[:300]
	}
	return s
}

// CallTool calls a tool; it implements the graph runtime's MCPCaller. connection, when set,
// must be the server's own connection (a node cannot borrow another's credential).
func (s *Service) CallTool(ctx context.Context, server, name string, args any, connection string) (any, error) {
	if connection != "" {
		r, err := s.find(ctx, server)
		if err != nil {
			return nil, err
		}
		if r.Connection != connection {
			if s.conns == nil {
				return nil, ErrUnavailable.Msg("connections are not available")
			}
			// Resolving surfaces a missing, disabled or undecryptable connection as an error.
			if _, err := s.conns.ResolveMCP(ctx, connection); err != nil {
				return nil, err
			}
		}
	}
	cs, timeout, err := s.session(ctx, server)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if cctx.Err() != nil {
			return nil, ErrUnavailable.Msg("tool %q on server %q timed out", name, server)
		}
		var wire interface{ Error() string }
		if errors.As(err, &wire) && strings.Contains(err.Error(), "closed") {
			s.dropBroken(server, cs)
		}
		return nil, ErrToolFailed.Msg("tool %q on server %q: %s", name, server, trim(err.Error()))
	}
	content := make([]any, 0, len(res.Content))
	var texts []string
	for _, c := range res.Content {
		raw, _ := json.Marshal(c)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		content = append(content, m)
		if tc, ok := c.(*sdk.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	if res.IsError {
		return nil, ErrToolFailed.Msg("tool %q on server %q reported an error: %s", name, server, trim(strings.Join(texts, "\n")))
	}
	out := map[string]any{"content": content}
	if res.StructuredContent != nil {
		out["structuredContent"] = res.StructuredContent
	}
	if len(texts) > 0 {
		out["text"] = strings.Join(texts, "\n")
	}
	return out, nil
}

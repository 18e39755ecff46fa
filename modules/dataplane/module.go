// Package dataplane serves the inference plane's OpenAI-compatible /v1 API: it resolves
// the logical id in the model field, rewrites the request for the bound upstream (provider
// model name, bearer credential, max_tokens cap) and relays the answer unbuffered.
package dataplane

import (
	_ "embed"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
)

// Defaults for Options.
const (
	DefaultTimeout     = 5 * time.Minute
	DefaultUploadLimit = 25 << 20 // the audio upload limit of the OpenAI API
	DefaultJSONLimit   = 32 << 20 // chat requests carry inline (base64) images
	DefaultMediaLimit  = 64 << 20 // speech audio and generated images read into memory
)

// UploadPath is the route whose body (an audio file) is bounded by Options.UploadLimit.
const UploadPath = "/v1/audio/transcriptions"

// Options configure the module.
type Options struct {
	Models      Models      // required
	Credentials Credentials // resolves credentialRef for hosted-compatible targets
	// Bindings adds or replaces bindings by name; BindingHosted is built in.
	Bindings map[string]Binding
	// Timeout is the longest an upstream may stay silent: before its response headers and
	// between two reads of its body. 0 = DefaultTimeout.
	Timeout time.Duration
	// UploadLimit bounds a transcription upload. 0 = DefaultUploadLimit.
	UploadLimit int64
	// JSONLimit bounds the JSON body of the other /v1 requests (the plane's
	// SERVICE_BODY_LIMIT is too small for inline images). 0 = DefaultJSONLimit.
	JSONLimit int64
	// MediaLimit bounds speech audio and each generated image. 0 = DefaultMediaLimit.
	MediaLimit int64
	// Transport reaches the upstreams; nil = a pooled transport sized for concurrent streams.
	Transport http.RoundTripper
	Logger    zerolog.Logger
}

// Module serves /v1/*.
type Module struct {
	models      Models
	bindings    map[string]Binding
	client      *http.Client // upstream API calls: redirects are not followed
	fetcher     *http.Client // image downloads: redirects followed (signed storage URLs)
	timeout     time.Duration
	uploadLimit int64
	jsonLimit   int64
	mediaLimit  int64
	log         zerolog.Logger
	bufs        sync.Pool // relay buffers, recycled across requests
}

// New builds the module.
func New(opts Options) (*Module, error) {
	if opts.Models == nil {
		return nil, errors.New("dataplane: Models is required")
	}
	m := &Module{
		models:      opts.Models,
		bindings:    map[string]Binding{BindingHosted: HostedBinding{Credentials: opts.Credentials}},
		timeout:     opts.Timeout,
		uploadLimit: opts.UploadLimit,
		jsonLimit:   opts.JSONLimit,
		mediaLimit:  opts.MediaLimit,
		log:         opts.Logger,
	}
	for k, b := range opts.Bindings {
		m.bindings[k] = b
	}
	if m.timeout <= 0 {
		m.timeout = DefaultTimeout
	}
	if m.uploadLimit <= 0 {
		m.uploadLimit = DefaultUploadLimit
	}
	if m.jsonLimit <= 0 {
		m.jsonLimit = DefaultJSONLimit
	}
	if m.mediaLimit <= 0 {
		m.mediaLimit = DefaultMediaLimit
	}
	tr := opts.Transport
	if tr == nil {
		tr = NewTransport()
	}
	// No client timeout: the watchdog bounds silence, and streams last as long as needed.
	// Redirects are not followed for POSTs to upstreams (net/http would turn them into GETs).
	m.client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	m.fetcher = &http.Client{Transport: tr}
	return m, nil
}

// NewTransport is the upstream transport: pooled keep-alive connections (many concurrent
// streams to one provider), a bounded dial, proxies from the environment.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// SkipBodyLimit tells the plane's body-limit middleware to leave /v1 alone: the module
// applies Options.JSONLimit and Options.UploadLimit there itself.
func SkipBodyLimit(c echo.Context) bool { return strings.HasPrefix(c.Request().URL.Path, "/v1/") }

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the module's OpenAPI fragment.
func (m *Module) OpenAPI() []byte { return openapiDoc }

// Register mounts the routes.
func (m *Module) Register(g *echo.Group) {
	g.GET("/v1/models", m.listModels)
	g.GET("/v1/models/:id", m.getModel)
	g.POST("/v1/chat/completions", m.chatCompletions)
	g.POST("/v1/embeddings", m.embeddings)
	g.POST("/v1/audio/speech", m.speech)
	g.POST(UploadPath, m.transcriptions)
	g.POST("/v1/images/generations", m.images)
}

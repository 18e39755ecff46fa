package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/config"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/events"
	"github.com/svc-dev/svc/platform/events/pgrelay"
	"github.com/svc-dev/svc/platform/httpx"
	"github.com/svc-dev/svc/platform/log"
	"github.com/svc-dev/svc/platform/metrics"
	"github.com/svc-dev/svc/platform/openapi"
	"github.com/svc-dev/svc/platform/secrets"
)

func newServeCmd() *cobra.Command {
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane, the inference plane, or both",
	}
	for _, which := range []string{"control", "inference", "all"} {
		which := which
		c := &cobra.Command{
			Use:   which,
			Short: map[string]string{"control": "Run the control plane (:8080)", "inference": "Run the inference plane (:8081)", "all": "Run both planes in one process (zero setup, embedded SQLite)"}[which],
			Args:  cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				cfg, err := loadConfig(c)
				if err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				logger := log.New(os.Stderr, cfg.LogLevel, cfg.LogFormat)
				return serveUntilDone(ctx, cfg, which, logger)
			},
		}
		config.AddFlags(c.Flags())
		serve.AddCommand(c)
	}
	return serve
}

// deps are the shared collaborators built once per process and handed to the planes.
type deps struct {
	cfg  *config.Config
	log  zerolog.Logger
	db   *database.DB
	keys *secrets.Keyring
	bus  *events.Bus
	// metrics is the process's Prometheus registry, shared by both planes of `serve all`.
	metrics *metrics.Metrics
	closer  []func() error
}

// plane is one HTTP server with its modules.
type plane struct {
	name     string
	addr     string
	echo     *echo.Echo
	modules  []httpx.Module
	starters []httpx.Starter
}

// serveUntilDone opens the database, builds the requested planes, serves until ctx ends,
// then shuts down gracefully: stop accepting, end streams, drain, close the database.
func serveUntilDone(ctx context.Context, cfg *config.Config, which string, logger zerolog.Logger) error {
	db, err := database.Open(ctx, cfg.DatabaseURL, cfg.SQLitePath())
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("database: %w", err)}
	}
	keys, err := loadKeys(cfg, logger)
	if err != nil {
		_ = db.Close()
		return err
	}
	// Control-plane replicas on one PostgreSQL carry bus events (live trace spans) to each
	// other over LISTEN/NOTIFY; on SQLite there is one process and the bus stays local.
	var relay *pgrelay.Relay
	busOpts := events.Options{}
	if db.Dialect == database.Postgres && which != "inference" {
		relay, err = pgrelay.New(pgrelay.Options{URL: cfg.DatabaseURL, DB: db.SQL(), Logger: logger})
		if err != nil {
			_ = db.Close()
			return err
		}
		busOpts.Relay = relay
	}
	bus := events.NewBus(busOpts)
	d := &deps{cfg: cfg, log: logger, db: db, keys: keys, bus: bus, metrics: metrics.New()}
	d.closer = append(d.closer, func() error { bus.Close(); return nil })
	if relay != nil {
		relay.Start(bus)
		d.closer = append(d.closer, relay.Close) // closers run in reverse: the relay stops first
	}
	defer func() {
		for i := len(d.closer) - 1; i >= 0; i-- {
			_ = d.closer[i]()
		}
		_ = db.Close()
	}()

	// Migrations are applied in the background so that a database that is down at start
	// still lets the process answer /healthz, and /readyz 503 until it is back.
	migrateCtx, cancelMigrate := context.WithCancel(ctx)
	defer cancelMigrate()
	migrated := make(chan struct{})
	go func() {
		defer close(migrated)
		db.MigrateUntil(migrateCtx, func(err error) {
			logger.Warn().Err(err).Msg("database not ready; retrying migrations")
		})
	}()

	var planes []*plane
	if which == "control" || which == "all" {
		p, err := buildControl(ctx, d)
		if err != nil {
			return err
		}
		planes = append(planes, p)
	}
	if which == "inference" || which == "all" {
		p, err := buildInference(ctx, d)
		if err != nil {
			return err
		}
		planes = append(planes, p)
	}

	// streamsCtx is the base context of every request: cancelling it ends SSE loops.
	streamsCtx, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	var servers []*http.Server
	errc := make(chan error, len(planes))
	for _, p := range planes {
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return &exitError{code: 1, err: fmt.Errorf("%s plane: listen %s: %w", p.name, p.addr, err)}
		}
		srv := &http.Server{
			Handler:           p.echo,
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return streamsCtx },
		}
		servers = append(servers, srv)
		logger.Info().Str("plane", p.name).Str("addr", ln.Addr().String()).Msg("listening")
		go func(p *plane) {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s plane: %w", p.name, err)
			}
		}(p)
	}

	// Background work starts once the schema exists.
	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	var started []httpx.Starter
	var startMu sync.Mutex
	go func() {
		select {
		case <-migrated:
		case <-startCtx.Done():
			return
		}
		if !db.Migrated() {
			return
		}
		for _, p := range planes {
			for _, s := range p.starters {
				if err := s.Start(startCtx); err != nil {
					errc <- err
					return
				}
				startMu.Lock()
				started = append(started, s)
				startMu.Unlock()
			}
		}
	}()

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info().Msg("shutting down")
	case runErr = <-errc:
		logger.Error().Err(runErr).Msg("fatal")
	}
	cancelStart()
	endStreams()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(shutdownCtx); err != nil {
			logger.Warn().Err(err).Msg("shutdown: in-flight requests cut off")
		}
	}
	startMu.Lock()
	for i := len(started) - 1; i >= 0; i-- {
		if err := started[i].Stop(shutdownCtx); err != nil {
			logger.Warn().Err(err).Msg("stopping module")
		}
	}
	startMu.Unlock()
	logger.Info().Msg("stopped")
	return runErr
}

// mount registers modules on a plane, serves its OpenAPI document, and gates every route
// but health and docs behind a migrated database.
func (p *plane) mount(d *deps, title string) error {
	for _, m := range p.modules {
		if s, ok := m.(httpx.Starter); ok {
			p.starters = append(p.starters, s)
		}
	}
	// Group-level middleware in echo v4 registers catch-all routes that turn 405 into 404,
	// so the gate is plane-wide middleware (it runs after routing, so c.Path() is known).
	p.echo.Use(dbGate(d.db))
	root := p.echo.Group("")
	for _, m := range p.modules {
		m.Register(root)
	}
	frags := make([][]byte, 0, len(p.modules)+1)
	for _, m := range p.modules {
		frags = append(frags, m.OpenAPI())
	}
	frags = append(frags, []byte(`{"paths":{"/openapi.json":{"get":{"summary":"This OpenAPI document","responses":{"200":{"description":"OpenAPI 3 document"}}}}}}`))
	doc, err := openapi.Build(title, version, frags...)
	if err != nil {
		return err
	}
	p.echo.GET("/openapi.json", openapi.Handler(doc))
	return nil
}

// ErrDatabaseUnavailable answers requests that need the database while it is down or
// not yet migrated.
var ErrDatabaseUnavailable = apperr.Unavailable("database_unavailable", "the database is not ready yet")

func dbGate(db *database.DB) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			switch c.Path() {
			case "/healthz", "/readyz", "/metrics", "/openapi.json",
				"/", "/ui", "/ui/", "/ui/*", "/ui/config.json":
				// Health, docs and the static UI answer while the database is down.
				return next(c)
			}
			if !db.Migrated() {
				return ErrDatabaseUnavailable
			}
			return next(c)
		}
	}
}

// loadKeys parses SERVICE_SECRET_KEY; unset means an ephemeral key, with a warning that
// stored secrets will not survive a restart.
func loadKeys(cfg *config.Config, logger zerolog.Logger) (*secrets.Keyring, error) {
	if cfg.SecretKey == "" {
		logger.Warn().Msg("SERVICE_SECRET_KEY is unset: using an ephemeral key; stored secrets will not survive a restart")
		return secrets.Ephemeral(), nil
	}
	keys, err := secrets.ParseKeys(cfg.SecretKey)
	if err != nil {
		return nil, &config.Error{Env: "SERVICE_SECRET_KEY", Err: err}
	}
	return keys, nil
}

// Package database opens the relational store (embedded SQLite or PostgreSQL) with GORM,
// applies the embedded goose migrations, and offers a transaction helper.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/svc-dev/svc/db"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Dialects.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// DB is the opened database.
type DB struct {
	*gorm.DB
	Dialect  string
	sql      *sql.DB
	migrated atomic.Bool
}

// Open opens the database at url: empty → SQLite file at sqlitePath (its folder created),
// postgres:// → PostgreSQL with a bounded pool. It does not require the server to be up
// (readiness reports that); call Migrate before serving.
func Open(ctx context.Context, dbURL, sqlitePath string) (*DB, error) {
	cfg := &gorm.Config{
		TranslateError:         true,
		Logger:                 logger.Discard,
		NowFunc:                func() time.Time { return time.Now().UTC() },
		DisableAutomaticPing:   true,
		SkipDefaultTransaction: true,
	}
	if dbURL == "" {
		if err := os.MkdirAll(filepath.Dir(sqlitePath), 0o755); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
		dsn := "file:" + sqlitePath + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
		g, err := gorm.Open(sqlite.Open(dsn), cfg)
		if err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		s, err := g.DB()
		if err != nil {
			return nil, err
		}
		s.SetMaxOpenConns(8)
		s.SetMaxIdleConns(8)
		s.SetConnMaxIdleTime(5 * time.Minute)
		return &DB{DB: g, Dialect: SQLite, sql: s}, nil
	}
	if u, err := url.Parse(dbURL); err != nil || !strings.HasPrefix(u.Scheme, "postgres") {
		return nil, errors.New("database url must start with postgres://")
	}
	g, err := gorm.Open(postgres.New(postgres.Config{DSN: dbURL}), cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s, err := g.DB()
	if err != nil {
		return nil, err
	}
	s.SetMaxOpenConns(20)
	s.SetMaxIdleConns(10)
	s.SetConnMaxLifetime(30 * time.Minute)
	return &DB{DB: g, Dialect: Postgres, sql: s}, nil
}

// SQL returns the underlying *sql.DB.
func (d *DB) SQL() *sql.DB { return d.sql }

// Ping checks the database answers within ctx.
func (d *DB) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return d.sql.PingContext(ctx)
}

// Ready reports whether the database answers and the schema is migrated.
func (d *DB) Ready(ctx context.Context) error {
	if err := d.Ping(ctx); err != nil {
		return err
	}
	if !d.migrated.Load() {
		return errors.New("migrations not applied yet")
	}
	return nil
}

// Migrate applies every pending migration of the dialect. On PostgreSQL a session advisory
// lock serialises replicas that start together.
func (d *DB) Migrate(ctx context.Context) error {
	sub, err := fs.Sub(db.Migrations, "migrations/"+d.Dialect)
	if err != nil {
		return err
	}
	opts := []goose.ProviderOption{goose.WithAllowOutofOrder(true)}
	dialect := goose.DialectSQLite3
	if d.Dialect == Postgres {
		dialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(dialect, d.sql, sub, opts...)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	d.migrated.Store(true)
	return nil
}

// MigrateUntil retries Migrate until it succeeds or ctx ends (a database that is down at
// start must not keep the process from serving /healthz and a 503 /readyz).
func (d *DB) MigrateUntil(ctx context.Context, onErr func(error)) {
	delay := 250 * time.Millisecond
	for {
		err := d.Migrate(ctx)
		if err == nil {
			return
		}
		if onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		if delay < 5*time.Second {
			delay *= 2
		}
	}
}

// Migrated reports whether Migrate has succeeded.
func (d *DB) Migrated() bool { return d.migrated.Load() }

// Close closes the pool.
func (d *DB) Close() error { return d.sql.Close() }

// Tx runs fn in a transaction; fn's error rolls back.
func (d *DB) Tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return d.WithContext(ctx).Transaction(fn)
}

// IsNotFound reports a missing row.
func IsNotFound(err error) bool { return errors.Is(err, gorm.ErrRecordNotFound) }

// IsDuplicate reports a unique-key violation (both dialects, via TranslateError).
func IsDuplicate(err error) bool { return errors.Is(err, gorm.ErrDuplicatedKey) }

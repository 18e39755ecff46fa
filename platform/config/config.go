// Package config loads the one typed configuration of svc from SERVICE_* environment
// variables and matching command-line flags (flags win), and validates it once.
package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Config is the whole configuration. Modules receive the parts they need; they never read
// the environment themselves.
type Config struct {
	DatabaseURL      string
	DataDir          string
	ControlAddr      string
	InferenceAddr    string
	InferenceURL     string
	InvokeToken      string
	SecretKey        string
	CORSOrigins      []string
	Durable          bool
	DurableLease     time.Duration
	RunLease         time.Duration
	MaxResident      int
	LogLevel         string
	LogFormat        string
	BodyLimit        int64
	ArtifactMaxBytes int64
	ShutdownTimeout  time.Duration
	UpstreamTimeout  time.Duration
	OTLPEndpoint     string
	CatalogHubURL    string
}

// Setting describes one configuration entry: its variable, flag, default and meaning.
type Setting struct {
	Env     string
	Flag    string
	Default string
	Usage   string
	apply   func(c *Config, v string) error
}

// Settings is the table of every configuration entry, in README order.
func Settings() []Setting {
	return []Setting{
		{"SERVICE_DATABASE_URL", "database-url", "", "empty = embedded SQLite at $SERVICE_DATA_DIR/svc.db; postgres://… for PostgreSQL", func(c *Config, v string) error {
			if v == "" {
				c.DatabaseURL = ""
				return nil
			}
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
				return fmt.Errorf("must be empty or a postgres://user@host:port/db URL")
			}
			c.DatabaseURL = v
			return nil
		}},
		{"SERVICE_DATA_DIR", "data-dir", "./data", "SQLite file, artifacts, downloaded models", func(c *Config, v string) error {
			if strings.TrimSpace(v) == "" {
				return fmt.Errorf("must not be empty")
			}
			c.DataDir = filepath.Clean(v)
			return nil
		}},
		{"SERVICE_CONTROL_ADDR", "control-addr", ":8080", "control-plane listen address", addr(func(c *Config) *string { return &c.ControlAddr })},
		{"SERVICE_INFERENCE_ADDR", "inference-addr", ":8081", "inference-plane listen address", addr(func(c *Config) *string { return &c.InferenceAddr })},
		{"SERVICE_INFERENCE_URL", "inference-url", "http://127.0.0.1:8081", "where the control plane (and the CLI) reach the inference plane", func(c *Config, v string) error {
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("must be an http(s) URL")
			}
			c.InferenceURL = strings.TrimRight(v, "/")
			return nil
		}},
		{"SERVICE_INVOKE_TOKEN", "invoke-token", "", "bearer token for POST /agents/{id}/invoke; unset = invoke closed", func(c *Config, v string) error { c.InvokeToken = v; return nil }},
		{"SERVICE_SECRET_KEY", "secret-key", "", "comma-separated 32-byte keys (base64 or hex); first encrypts, all decrypt; unset = ephemeral key", func(c *Config, v string) error { c.SecretKey = v; return nil }},
		{"SERVICE_CORS_ORIGINS", "cors-origins", "", "comma-separated allowed browser origins (exact match)", func(c *Config, v string) error {
			c.CORSOrigins = nil
			for _, o := range strings.Split(v, ",") {
				o = strings.TrimSpace(o)
				if o == "" {
					continue
				}
				if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" {
					return fmt.Errorf("origin %q must look like https://host[:port]", o)
				}
				c.CORSOrigins = append(c.CORSOrigins, o)
			}
			return nil
		}},
		{"SERVICE_DURABLE", "durable", "0", "1 enables durable mode (checkpointed runs, human nodes, subgraph, loop, map)", func(c *Config, v string) error {
			b, err := parseBool(v)
			c.Durable = b
			return err
		}},
		{"SERVICE_DURABLE_LEASE", "durable-lease", "30s", "durable mode: how long a replica's claim on a run lasts without renewal (renewed every third of it); a crashed replica's runs are taken over after it", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 300*time.Millisecond || d > time.Hour {
				return fmt.Errorf("must be a duration from 300ms to 1h, such as 30s")
			}
			c.DurableLease = d
			return nil
		}},
		{"SERVICE_RUN_LEASE", "run-lease", "30s", "how long a replica's claim on its in-flight non-durable runs lasts without renewal (renewed every third of it); another replica fails a crashed replica's runs (interrupted) one to two leases after the crash", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 300*time.Millisecond || d > time.Hour {
				return fmt.Errorf("must be a duration from 300ms to 1h, such as 30s")
			}
			c.RunLease = d
			return nil
		}},
		{"SERVICE_MAX_RESIDENT", "max-resident", "2", "resident local engine slots", func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 64 {
				return fmt.Errorf("must be an integer from 1 to 64")
			}
			c.MaxResident = n
			return nil
		}},
		{"SERVICE_LOG_LEVEL", "log-level", "info", "debug, info, warn or error", func(c *Config, v string) error {
			switch v {
			case "debug", "info", "warn", "error":
				c.LogLevel = v
				return nil
			}
			return fmt.Errorf("must be one of debug, info, warn, error")
		}},
		{"SERVICE_LOG_FORMAT", "log-format", "", "json or console; empty = console on a TTY, json otherwise", func(c *Config, v string) error {
			switch v {
			case "", "json", "console":
				c.LogFormat = v
				return nil
			}
			return fmt.Errorf("must be json or console")
		}},
		{"SERVICE_BODY_LIMIT", "body-limit", "4MiB", "largest JSON request body", size(func(c *Config) *int64 { return &c.BodyLimit })},
		{"SERVICE_ARTIFACT_MAX_BYTES", "artifact-max-bytes", "512MiB", "largest artifact upload", size(func(c *Config) *int64 { return &c.ArtifactMaxBytes })},
		{"SERVICE_SHUTDOWN_TIMEOUT", "shutdown-timeout", "15s", "how long shutdown waits for in-flight requests", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("must be a duration such as 15s")
			}
			c.ShutdownTimeout = d
			return nil
		}},
		{"SERVICE_UPSTREAM_TIMEOUT", "upstream-timeout", "5m", "inference plane: the longest a model upstream may stay silent (before answering, or between two chunks) before 504 upstream_timeout", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("must be a positive duration such as 5m")
			}
			c.UpstreamTimeout = d
			return nil
		}},
		{"SERVICE_OTLP_ENDPOINT", "otlp-endpoint", "", "OTLP/HTTP traces endpoint (e.g. http://127.0.0.1:4318); empty = no export", func(c *Config, v string) error {
			if v != "" {
				if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return fmt.Errorf("must be an http(s) URL")
				}
			}
			c.OTLPEndpoint = v
			return nil
		}},
		{"SERVICE_CATALOG_HUB_URL", "catalog-hub-url", "https://huggingface.co", "inference plane: the model hub the catalog searches and downloads from (Hugging Face API); unreachable = the curated list in configs/catalog.json", func(c *Config, v string) error {
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
				return fmt.Errorf("must be an http(s) URL without credentials or query")
			}
			c.CatalogHubURL = strings.TrimRight(v, "/")
			return nil
		}},
	}
}

// AddFlags registers one flag per setting on fs.
func AddFlags(fs *pflag.FlagSet) {
	for _, s := range Settings() {
		fs.String(s.Flag, s.Default, s.Usage+" ("+s.Env+")")
	}
}

// Error is a configuration error naming the variable.
type Error struct {
	Env string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("config: %s: %v", e.Env, e.Err) }

// Load resolves every setting: a flag that was set wins, then the environment, then the
// default. fs may be nil (environment and defaults only).
func Load(fs *pflag.FlagSet, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Config{}
	for _, s := range Settings() {
		v := s.Default
		if e, ok := lookup(getenv, s.Env); ok {
			v = e
		}
		if fs != nil {
			if f := fs.Lookup(s.Flag); f != nil && f.Changed {
				v = f.Value.String()
			}
		}
		if err := s.apply(c, v); err != nil {
			return nil, &Error{Env: s.Env, Err: err}
		}
	}
	return c, nil
}

// Defaults returns the configuration with every default applied (for tests).
func Defaults() *Config {
	c, err := Load(nil, func(string) string { return "" })
	if err != nil {
		panic(err) // defaults are constants: a failure is a programming error
	}
	return c
}

// SQLitePath is where the embedded database lives.
func (c *Config) SQLitePath() string { return filepath.Join(c.DataDir, "svc.db") }

func lookup(getenv func(string) string, k string) (string, bool) {
	v := getenv(k)
	return v, v != ""
}

func addr(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		host, port, err := splitHostPort(v)
		if err != nil {
			return err
		}
		_ = host
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("port must be a number from 0 to 65535")
		}
		*field(c) = v
		return nil
	}
}

func splitHostPort(v string) (string, string, error) {
	i := strings.LastIndex(v, ":")
	if i < 0 {
		return "", "", fmt.Errorf("must be host:port or :port")
	}
	return v[:i], v[i+1:], nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off", "":
		return false, nil
	}
	return false, fmt.Errorf("must be 0 or 1")
}

func size(field func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := ParseSize(v)
		if err != nil {
			return err
		}
		*field(c) = n
		return nil
	}
}

// ParseSize reads sizes such as 1048576, 512KiB, 4MiB, 1GiB, 10MB.
func ParseSize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	mult := int64(1)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"B", 1}}
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			mult = u.mult
			s = strings.TrimSpace(strings.TrimSuffix(s, u.suffix))
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("must be a positive size such as 4MiB")
	}
	return n * mult, nil
}

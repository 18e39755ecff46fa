package config_test

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/svc-dev/svc/platform/config"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c := config.Defaults()
	if c.ControlAddr != ":8080" || c.InferenceAddr != ":8081" || c.MaxResident != 2 || c.Durable || c.DataDir != "data" {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestFlagsWinOverEnv(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.AddFlags(fs)
	if err := fs.Parse([]string{"--max-resident", "5"}); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(fs, env(map[string]string{"SERVICE_MAX_RESIDENT": "3", "SERVICE_DURABLE": "1", "SERVICE_CORS_ORIGINS": "https://a.example, http://localhost:5173"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxResident != 5 || !c.Durable || len(c.CORSOrigins) != 2 {
		t.Fatalf("got %+v", c)
	}
}

func TestBadValuesNameTheVariable(t *testing.T) {
	for k, v := range map[string]string{
		"SERVICE_MAX_RESIDENT":  "abc",
		"SERVICE_DATABASE_URL":  "mysql://x",
		"SERVICE_DURABLE":       "maybe",
		"SERVICE_CONTROL_ADDR":  "nohost",
		"SERVICE_INFERENCE_URL": "ftp://x",
		"SERVICE_LOG_LEVEL":     "loud",
		"SERVICE_BODY_LIMIT":    "-1",
		"SERVICE_CORS_ORIGINS":  "not a url",
	} {
		_, err := config.Load(nil, env(map[string]string{k: v}))
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Fatalf("%s=%s: got %v", k, v, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"10": 10, "4MiB": 4 << 20, "1GiB": 1 << 30, "2KB": 2000} {
		if got, err := config.ParseSize(in); err != nil || got != want {
			t.Fatalf("%s: %d %v", in, got, err)
		}
	}
}

package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/svc-dev/svc/platform/config"
)

// TestREADMEListsEverySetting keeps the README's configuration table complete.
func TestREADMEListsEverySetting(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range config.Settings() {
		if !strings.Contains(string(b), "`"+s.Env+"`") || !strings.Contains(string(b), "`--"+s.Flag+"`") {
			t.Errorf("README.md lacks %s / --%s", s.Env, s.Flag)
		}
	}
}

package web

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestJavaScriptHelpers runs testdata/*.test.mjs under Node's test runner; machines without
// node skip it (the UI itself needs no node: it has no build step).
func TestJavaScriptHelpers(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// --experimental-detect-module: the UI's files are ES modules without a package.json.
	out, err := exec.CommandContext(ctx, node, "--experimental-detect-module", "--test", "testdata/api.test.mjs").CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

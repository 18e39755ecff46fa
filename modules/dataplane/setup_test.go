package dataplane_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
	"github.com/svc-dev/svc/platform/httpx"
	"github.com/svc-dev/svc/platform/testkit"
)

const secret = "sk-test-0123456789-secret"

// logBuffer collects the server's log lines (written from handler goroutines).
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// bundle is the plane under test and its collaborators.
type bundle struct {
	srv    *testkit.Server
	up     *dataplanetest.Upstream
	models *dataplanetest.Models
	logs   *logBuffer
}

// setup starts a scripted upstream and the data plane in front of it with three targets:
// "chat" (credential, maxTokens 100), "open" (no credential, no cap) and "nocred" (a ref
// that does not resolve).
func setup(t testing.TB, script dataplanetest.Script, tune ...func(*dataplane.Options)) *bundle {
	t.Helper()
	up := dataplanetest.New(script)
	t.Cleanup(up.Close)
	models := dataplanetest.NewModels(
		dataplane.Target{LogicalID: "chat", BaseURL: up.BaseURL(), Model: "provider-chat-1", MaxTokens: 100, CredentialRef: "secret://KEY", CreatedAt: time.Unix(1710000000, 0)},
		dataplane.Target{LogicalID: "open", BaseURL: up.BaseURL(), Model: "provider-open"},
		dataplane.Target{LogicalID: "nocred", BaseURL: up.BaseURL(), Model: "provider-x", CredentialRef: "secret://MISSING"},
	)
	opts := dataplane.Options{Models: models, Credentials: dataplanetest.Credentials{"secret://KEY": secret}}
	for _, f := range tune {
		f(&opts)
	}
	logs := &logBuffer{}
	opts.Logger = testLogger(logs)
	m, err := dataplane.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := testkit.New(t, testkit.Options{
		Options: httpx.Options{OpenAIPrefix: "/v1/", BodyLimitSkip: dataplane.SkipBodyLimit},
		LogTo:   logs,
	}, m)
	t.Cleanup(func() {
		if bytes.Contains([]byte(logs.String()), []byte(secret)) {
			t.Errorf("the credential value appears in the logs")
		}
	})
	return &bundle{srv: srv, up: up, models: models, logs: logs}
}

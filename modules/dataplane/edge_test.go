package dataplane_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
)

// customUpstream registers model "custom" served by handler.
func customUpstream(t *testing.T, b *bundle, handler http.HandlerFunc) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	b.models.Put(dataplane.Target{LogicalID: "custom", BaseURL: srv.URL + "/v1", Model: "m"})
}

// TestClientGoneCancelsUpstream: when the client drops a stream, the upstream request is
// cancelled instead of running on.
func TestClientGoneCancelsUpstream(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	cancelled := make(chan struct{})
	customUpstream(t, b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[]}\n\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		close(cancelled)
	})
	resp := postStream(t, b.srv.URL, `{"model":"custom","stream":true,"messages":[]}`)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q: %v", line, err)
	}
	resp.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("the upstream request was not cancelled after the client went away")
	}
}

// TestBrokenBodyIsAborted: a non-stream answer that breaks off must not reach the client as
// a complete body.
func TestBrokenBodyIsAborted(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	customUpstream(t, b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, `{"id":"chatcmpl-1","choices":[`) // chunked, then cut
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	})
	resp, err := http.Post(b.srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"custom","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("the client read a complete body %q from a broken upstream answer", body)
	}
}

// TestUpstreamRedirectIsNotFollowed: a POST is never replayed elsewhere (net/http would turn
// it into a GET); the 3xx is reported.
func TestUpstreamRedirectIsNotFollowed(t *testing.T) {
	b := setup(t, dataplanetest.Script{})
	customUpstream(t, b, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://example.invalid/v1/chat/completions", http.StatusMovedPermanently)
	})
	r := b.srv.Do("POST", "/v1/chat/completions", `{"model":"custom","messages":[]}`)
	if r.Status != 502 || r.ErrorCode() != "upstream_protocol" {
		t.Errorf("= %d %s", r.Status, r.Body)
	}
}

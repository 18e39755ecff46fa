package cmd

import (
	"bytes"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/modules/triggers"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

// BenchmarkWebhookToCompleted measures signed webhook deliveries of the greeter agent
// (IR.md) through the real control plane, from the first POST /hooks/{id} until every run it
// started is completed in the database: b.N deliveries from 16 concurrent senders over HTTP,
// reported as runs/s.
func BenchmarkWebhookToCompleted(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			db := dbtest.Open(b, dialect)
			srv := controlPlane(b, db)
			greeter := `{"id":"greeter","nodes":[{"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name}"},{"id":"out","kind":"output","value":"$in.in.greeting"}],"edges":[{"source":"shape","target":"out"}]}`
			if r := testkit.Do(b, srv.URL, "POST", "/agents", `{"ir":`+greeter+`}`); r.Status != 201 {
				b.Fatalf("publish: %d %s", r.Status, r.Body)
			}
			const secret = "benchmark-webhook-secret"
			r := testkit.Do(b, srv.URL, "POST", "/triggers", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "1", "config": map[string]any{"secret": secret}})
			if r.Status != 201 {
				b.Fatalf("trigger: %d %s", r.Status, r.Body)
			}
			id, _ := r.Map(b)["id"].(string)
			body := []byte(`{"name":"Ada"}`)
			sig := triggers.Sign([]byte(secret), body)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			completed := func() int64 {
				var n int64
				if err := db.Raw("SELECT count(*) FROM runs WHERE trigger_id = ? AND status = 'completed'", id).Scan(&n).Error; err != nil {
					b.Fatal(err)
				}
				return n
			}
			var failed atomic.Int64
			var sent atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for sent.Add(1) <= int64(b.N) {
						req, _ := http.NewRequest("POST", srv.URL+"/hooks/"+id, bytes.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set(triggers.SignatureHeader, sig)
						resp, err := client.Do(req)
						if err != nil || resp.StatusCode != http.StatusAccepted {
							failed.Add(1)
						}
						if resp != nil {
							resp.Body.Close()
						}
					}
				}()
			}
			wg.Wait()
			accepted := time.Since(start)
			for completed() < int64(b.N)-failed.Load() {
				time.Sleep(2 * time.Millisecond)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d of %d deliveries failed", n, b.N)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "runs/s")
			b.ReportMetric(float64(b.N)/accepted.Seconds(), "accepted/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

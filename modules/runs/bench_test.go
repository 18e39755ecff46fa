package runs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/agents"
	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/modules/runs"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

// savedAgents resolves through the real agents service, like the composition root does.
type savedAgents struct{ svc *agents.Service }

func (a savedAgents) Resolve(ctx context.Context, id, version, hash string) (runs.AgentVersion, error) {
	v, err := a.svc.Resolve(ctx, id, version, hash)
	if err != nil {
		return runs.AgentVersion{}, err
	}
	g, err := graph.Decode(v.IR)
	if err != nil {
		return runs.AgentVersion{}, err
	}
	return runs.AgentVersion{AgentID: v.AgentID, Version: v.Version, ContentHash: v.ContentHash, Graph: g}, nil
}

// BenchmarkGreeterImmediate measures immediate (stream: false) runs of the greeter agent
// over HTTP: the agents, runs and sessions modules on a real database behind the shared echo
// stack, with one client and with 8 per CPU. It reports runs/s and the p50/p99 latency.
//
//	go test ./modules/runs/ -run '^$' -bench GreeterImmediate -benchtime 3000x
func BenchmarkGreeterImmediate(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		for _, par := range []int{0, 8} {
			name := dialect + "/1-client"
			if par > 0 {
				name = dialect + "/8-per-cpu"
			}
			b.Run(name, func(b *testing.B) {
				benchGreeter(b, dbtest.Open(b, dialect), par)
			})
		}
	}
}

func benchGreeter(b *testing.B, db *database.DB, parallelism int) {
	agentStore, err := agents.NewService(db)
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := agentStore.Create(context.Background(), agents.CreateInput{IR: json.RawMessage(greeter)}); err != nil {
		b.Fatal(err)
	}
	store, _ := runs.NewStore(db)
	svc, err := runs.NewService(runs.Options{Store: store, Executor: runtime.New(runtime.Deps{}), Agents: savedAgents{agentStore}, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	srv := testkit.New(b, testkit.Options{}, runs.New(svc, runs.ModuleOptions{}))
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body := []byte(`{"input":{"name":"Ada"},"stream":false}`)
	url := srv.URL + "/agents/greeter/runs"

	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	loop := func(pb interface{ Next() bool }) {
		local := make([]time.Duration, 0, 256)
		for pb.Next() {
			t0 := time.Now()
			resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Contains(raw, []byte(`"Hello, Ada"`)) {
				b.Errorf("run: %d %s", resp.StatusCode, raw)
				return
			}
			local = append(local, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	}
	if parallelism > 0 {
		b.SetParallelism(parallelism) // parallelism × GOMAXPROCS clients
		b.RunParallel(func(pb *testing.PB) { loop(pb) })
	} else {
		loop(&serial{n: b.N})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// serial is a one-client loop of n iterations.
type serial struct{ n int }

func (s *serial) Next() bool {
	s.n--
	return s.n >= 0
}

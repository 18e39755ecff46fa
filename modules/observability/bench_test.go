package observability

import (
	"context"
	"testing"

	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/events"
)

// BenchmarkGreeterTracing measures the run rate of the greeter agent (IR.md) through the real
// executor with tracing off (no sink) and on (the recorder's sink, the bus, and the background
// writer persisting spans and I/O metadata to SQLite while the runs go on).
func BenchmarkGreeterTracing(b *testing.B) {
	const ir = `{"nodes":[
	  {"id":"shape","kind":"transform","expr":"{greeting: \"Hello, \" + $in.in.name}"},
	  {"id":"out","kind":"output","value":"$in.in.greeting"}],
	 "edges":[{"source":"shape","target":"out"}]}`
	g := mustGraph(b, ir)
	input := map[string]any{"name": "Ada"}
	ex := runtime.New(runtime.Deps{})
	ctx := context.Background()

	b.Run("off", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if res := ex.Run(ctx, runtime.Spec{RunID: "r", Graph: g, ContentHash: "h", Input: input}); res.Status != runtime.StatusCompleted {
				b.Fatal(res.Err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
	})
	// hot-path: the sink alone (events → spans → bus) with the writer paused until the timer
	// stops, i.e. what a run itself pays; the others keep the writer running alongside.
	for _, mode := range []string{"hot-path", CaptureMetadata, CaptureFull} {
		capture, writer := mode, true
		if mode == "hot-path" {
			capture, writer = CaptureMetadata, false
		}
		b.Run("on/"+mode, func(b *testing.B) {
			db := dbtest.Open(b, database.SQLite)
			bus := events.NewBus(events.Options{})
			defer bus.Close()
			pols := &policies{}
			pols.set("greeter", Policy{Capture: capture})
			rec := NewRecorder(RecorderOptions{DB: db, Bus: bus, Policies: pols})
			if writer {
				if err := rec.Start(ctx); err != nil {
					b.Fatal(err)
				}
			}
			ids := make([]string, b.N)
			for i := range ids {
				ids[i] = "run_" + itoa(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				info := RunInfo{RunID: ids[i], AgentID: "greeter"}
				sink := rec.RunStarted(ctx, info)
				res := ex.Run(ctx, runtime.Spec{RunID: ids[i], Graph: g, ContentHash: "h", Input: input, Sink: sink})
				if res.Status != runtime.StatusCompleted {
					b.Fatal(res.Err)
				}
				rec.RunFinished(ctx, info, RunOutcome{Status: res.Status, Output: res.Output})
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			b.StopTimer()
			if err := rec.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			var n int64
			if err := db.Table("trace_spans").Count(&n).Error; err != nil || n != int64(3*b.N) {
				b.Fatalf("persisted %d spans for %d runs (%v)", n, b.N, err)
			}
		})
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var buf [20]byte
	p := len(buf)
	for ; i > 0; i /= 10 {
		p--
		buf[p] = byte('0' + i%10)
	}
	return string(buf[p:])
}

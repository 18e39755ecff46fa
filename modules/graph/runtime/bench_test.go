package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/apperr"
)

func benchRun(b *testing.B, g *graph.Graph, input any, want string) {
	e := New(Deps{})
	ctx := context.Background()
	if res := e.Run(ctx, Spec{Graph: g, Input: input}); asJSON(res.Output) != want {
		b.Fatalf("output %s (err %v), want %s", asJSON(res.Output), res.Err, want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res := e.Run(ctx, Spec{Graph: g, Input: input}); res.Status != StatusCompleted {
			b.Fatal(res.Err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "exec/s")
}

func BenchmarkGreeter(b *testing.B) {
	benchRun(b, mustGraph(b, greeterIR), map[string]any{"name": "Ada"}, `"Hello, Ada"`)
}

// fanOutIR is one entry node, n parallel transforms and a join reading all of them.
func fanOutIR(n int) string {
	var nodes, edges, sum []string
	nodes = append(nodes, `{"id":"src","kind":"transform","expr":"$in.in.x"}`)
	for i := 0; i < n; i++ {
		nodes = append(nodes, fmt.Sprintf(`{"id":"b%d","kind":"transform","expr":"$in.in + %d"}`, i, i))
		edges = append(edges, fmt.Sprintf(`{"source":"src","target":"b%d"}`, i), fmt.Sprintf(`{"source":"b%d","target":"join","targetPort":"p%d"}`, i, i))
		sum = append(sum, fmt.Sprintf("$in.p%d", i))
	}
	nodes = append(nodes, fmt.Sprintf(`{"id":"join","kind":"transform","expr":%q}`, strings.Join(sum, " + ")), `{"id":"out","kind":"output"}`)
	edges = append(edges, `{"source":"join","target":"out"}`)
	return `{"nodes":[` + strings.Join(nodes, ",") + `],"edges":[` + strings.Join(edges, ",") + `]}`
}

func BenchmarkFanOut50(b *testing.B) {
	// sum over i of (1 + i) for i < 50 = 50 + 1225.
	benchRun(b, mustGraph(b, fanOutIR(50)), map[string]any{"x": 1}, `1275`)
}

// FuzzOutputTemplate runs arbitrary templates through an output node: the run must either
// complete or fail with template_error, never panic or fail otherwise.
func FuzzOutputTemplate(f *testing.F) {
	for _, s := range []string{"$in.in", "hi $in.in.a.b[0] and $in.in.c", "$in.in.list[3]", "$in.x", "$in.", "$in.in[99999999999]", "$$in.in", "$in.in.a-b.c"} {
		f.Add(s)
	}
	e := New(Deps{})
	input := map[string]any{"a": map[string]any{"b": []any{"x"}}, "c": 1.5, "list": []any{1.0, 2.0}}
	f.Fuzz(func(t *testing.T, tmpl string) {
		g := &graph.Graph{Nodes: []graph.Node{{ID: "o", Kind: graph.KindOutput, Value: tmpl}}}
		res := e.Run(context.Background(), Spec{Graph: g, Input: input})
		if res.Status == StatusCompleted {
			return
		}
		var ae *apperr.Error
		if !errors.As(res.Err, &ae) || ae.Code != "template_error" {
			t.Fatalf("template %q: %+v", tmpl, res)
		}
	})
}

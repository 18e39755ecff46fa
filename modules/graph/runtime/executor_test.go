package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/svc-dev/svc/modules/graph"
)

func TestIRExamples(t *testing.T) {
	e := New(Deps{})
	greeter, triage := mustGraph(t, greeterIR), mustGraph(t, triageIR)

	t.Run("greeter Ada", func(t *testing.T) {
		wantOutput(t, runG(t, e, greeter, mustJSON(t, `{"name":"Ada"}`), nil, nil), `"Hello, Ada"`)
	})
	t.Run("triage bug", func(t *testing.T) {
		rec := &recorder{}
		res := runG(t, e, triage, mustJSON(t, `{"kind":"bug","title":"crash"}`), rec, nil)
		wantOutput(t, res, `{"queue":"eng","title":"crash"}`)
		if st := rec.statusOf(); st["support"] != EventNodeSkipped || st["eng"] != EventNodeFinished {
			t.Fatalf("statuses %v", st)
		}
	})
	t.Run("triage praise", func(t *testing.T) {
		wantCode(t, runG(t, e, triage, mustJSON(t, `{"kind":"praise","title":"thanks"}`), nil, nil), "router_error", "route")
	})
	t.Run("greeter empty", func(t *testing.T) {
		ae := wantCode(t, runG(t, e, greeter, mustJSON(t, `{}`), nil, nil), "transform_error", "shape")
		if ae.Status != 422 {
			t.Fatalf("status %d", ae.Status)
		}
		if d := ae.Details.(map[string]any); d["position"] == nil && d["column"] == nil {
			t.Fatalf("no position in %v", d)
		}
	})
}

func TestNodeKindsTable(t *testing.T) {
	cases := []struct {
		name   string
		ir     string
		input  string
		output string // expected JSON output when code is empty
		code   string // expected error code
		node   string // node named in details
		note   string // substring of the note
	}{
		{
			name:   "transform arithmetic",
			ir:     `{"nodes":[{"id":"t","kind":"transform","expr":"$in.in.a + $in.in.b"},{"id":"o","kind":"output"}],"edges":[{"source":"t","target":"o"}]}`,
			input:  `{"a":2,"b":3}`,
			output: `5`,
		},
		{
			name:  "transform compile error",
			ir:    `{"nodes":[{"id":"t","kind":"transform","expr":"$in.in.a +"},{"id":"o","kind":"output"}],"edges":[{"source":"t","target":"o"}]}`,
			input: `{}`, code: "transform_error", node: "t",
		},
		{
			name:   "transform optional access",
			ir:     `{"nodes":[{"id":"t","kind":"transform","expr":"$in.in.missing ?? \"dflt\""},{"id":"o","kind":"output"}],"edges":[{"source":"t","target":"o"}]}`,
			input:  `{}`,
			output: `"dflt"`,
		},
		{
			name:   "output default is whole input",
			ir:     `{"nodes":[{"id":"o","kind":"output"}],"edges":[]}`,
			input:  `{"x":[1,2]}`,
			output: `{"x":[1,2]}`,
		},
		{
			name:   "output template interpolation and list index",
			ir:     `{"nodes":[{"id":"o","kind":"output","value":{"msg":"first is $in.in.items[0].n of $in.in.items","raw":"$in.in.items[1]"}}],"edges":[]}`,
			input:  `{"items":[{"n":"a"},{"n":"b"}]}`,
			output: `{"msg":"first is a of [{\"n\":\"a\"},{\"n\":\"b\"}]","raw":{"n":"b"}}`,
		},
		{
			name:  "output template missing field",
			ir:    `{"nodes":[{"id":"o","kind":"output","value":"hi $in.in.user.name"}],"edges":[]}`,
			input: `{"user":{}}`, code: "template_error", node: "o",
		},
		{
			name:  "template names unknown port",
			ir:    `{"nodes":[{"id":"o","kind":"output","value":"$in.other"}],"edges":[]}`,
			input: `{}`, code: "template_error", node: "o",
		},
		{
			name:   "router expression select with boolean handles",
			ir:     `{"nodes":[{"id":"r","kind":"router","select":"$in.in.n > 3","handles":["true","false"]},{"id":"big","kind":"output","value":"big"},{"id":"small","kind":"output","value":"small"}],"edges":[{"source":"r","sourcePort":"true","target":"big"},{"source":"r","sourcePort":"false","target":"small"}]}`,
			input:  `{"n":5}`,
			output: `"big"`,
		},
		{
			name:  "router select of a non-scalar",
			ir:    `{"nodes":[{"id":"r","kind":"router","select":"$in.in","handles":["a"]},{"id":"o","kind":"output"}],"edges":[{"source":"r","sourcePort":"a","target":"o"}]}`,
			input: `{"k":1}`, code: "router_error", node: "r",
		},
		{
			name:  "router select token missing",
			ir:    `{"nodes":[{"id":"r","kind":"router","select":"$in.in.kind","handles":["a"]},{"id":"o","kind":"output"}],"edges":[{"source":"r","sourcePort":"a","target":"o"}]}`,
			input: `{}`, code: "template_error", node: "r",
		},
		{
			name:  "two outputs executed is ambiguous",
			ir:    `{"nodes":[{"id":"a","kind":"output"},{"id":"b","kind":"output"}],"edges":[]}`,
			input: `1`, code: "ambiguous_output",
		},
		{
			name:   "no output reached completes with a note",
			ir:     `{"nodes":[{"id":"t","kind":"transform","expr":"1"}],"edges":[]}`,
			input:  `{}`,
			output: `null`, note: "without reaching an output",
		},
		{
			name:   "guardrail check pass",
			ir:     `{"nodes":[{"id":"g","kind":"guardrail","check":"len($in.in.text) < 10"},{"id":"ok","kind":"output"},{"id":"bad","kind":"output"}],"edges":[{"source":"g","sourcePort":"pass","target":"ok"},{"source":"g","sourcePort":"fail","target":"bad"}]}`,
			input:  `{"text":"short"}`,
			output: `{"text":"short"}`,
		},
		{
			name:   "guardrail check fail",
			ir:     `{"nodes":[{"id":"g","kind":"guardrail","check":"len($in.in.text) < 3"},{"id":"ok","kind":"output"},{"id":"bad","kind":"output"}],"edges":[{"source":"g","sourcePort":"pass","target":"ok"},{"source":"g","sourcePort":"fail","target":"bad"}]}`,
			input:  `{"text":"long"}`,
			output: `{"reason":"check failed: len($in.in.text) \u003c 3","value":{"text":"long"}}`,
		},
		{
			name:  "guardrail check not boolean",
			ir:    `{"nodes":[{"id":"g","kind":"guardrail","check":"1"},{"id":"ok","kind":"output"}],"edges":[{"source":"g","sourcePort":"pass","target":"ok"}]}`,
			input: `{}`, code: "guardrail_error", node: "g",
		},
		{
			name:   "guardrail maxLength on field",
			ir:     `{"nodes":[{"id":"g","kind":"guardrail","checks":[{"type":"maxLength","max":3,"field":"$in.in.text"}]},{"id":"bad","kind":"output","value":"$in.in.reason"}],"edges":[{"source":"g","sourcePort":"fail","target":"bad"}]}`,
			input:  `{"text":"héllo"}`,
			output: `"length 5 exceeds maximum 3"`,
		},
		{
			name:   "guardrail minLength and notEmpty pass",
			ir:     `{"nodes":[{"id":"g","kind":"guardrail","checks":[{"type":"minLength","min":2},{"type":"notEmpty"}]},{"id":"ok","kind":"output","value":"passed"}],"edges":[{"source":"g","sourcePort":"pass","target":"ok"}]}`,
			input:  `"ab"`,
			output: `"passed"`,
		},
		{
			name:   "guardrail notEmpty fails on blank",
			ir:     `{"nodes":[{"id":"g","kind":"guardrail","checks":[{"type":"notEmpty","message":"say something"}]},{"id":"bad","kind":"output","value":"$in.in.reason"}],"edges":[{"source":"g","sourcePort":"fail","target":"bad"}]}`,
			input:  `"  "`,
			output: `"say something"`,
		},
		{
			name:   "guardrail denyPatterns",
			ir:     `{"nodes":[{"id":"g","kind":"guardrail","checks":[{"type":"denyPatterns","patterns":["(?i)password","\\d{16}"]}]},{"id":"bad","kind":"output","value":"$in.in.reason"}],"edges":[{"source":"g","sourcePort":"fail","target":"bad"}]}`,
			input:  `"my PASSWORD is x"`,
			output: `"value matches denied pattern \"(?i)password\""`,
		},
		{
			name:   "guardrail requirePatterns",
			ir:     `{"nodes":[{"id":"g","kind":"guardrail","checks":[{"type":"requirePatterns","patterns":["^ticket-"]}]},{"id":"ok","kind":"output","value":"ok"},{"id":"bad","kind":"output","value":"bad"}],"edges":[{"source":"g","sourcePort":"pass","target":"ok"},{"source":"g","sourcePort":"fail","target":"bad"}]}`,
			input:  `"other"`,
			output: `"bad"`,
		},
		{
			name:   "guardrail jsonSchema pass",
			ir:     `{"nodes":[{"id":"g","kind":"guardrail","checks":[{"type":"jsonSchema","schema":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}}]},{"id":"ok","kind":"output","value":"ok"},{"id":"bad","kind":"output","value":"$in.in.reason"}],"edges":[{"source":"g","sourcePort":"pass","target":"ok"},{"source":"g","sourcePort":"fail","target":"bad"}]}`,
			input:  `{"name":"x"}`,
			output: `"ok"`,
		},
		{
			name:  "guardrail jsonSchema fail",
			ir:    `{"nodes":[{"id":"g","kind":"guardrail","checks":[{"type":"jsonSchema","schema":{"type":"object","required":["name"]}}]},{"id":"ok","kind":"output","value":"ok"},{"id":"bad","kind":"output","value":"$in.in.reason"}],"edges":[{"source":"g","sourcePort":"pass","target":"ok"},{"source":"g","sourcePort":"fail","target":"bad"}]}`,
			input: `{}`, output: `"value does not match the schema: at '': missing property 'name'"`,
		},
		{
			name:  "guardrail bad pattern",
			ir:    `{"nodes":[{"id":"g","kind":"guardrail","checks":[{"type":"denyPatterns","patterns":["("]}]},{"id":"ok","kind":"output"}],"edges":[{"source":"g","sourcePort":"pass","target":"ok"}]}`,
			input: `"x"`, code: "guardrail_error", node: "g",
		},
		{
			name:   "named input ports join",
			ir:     `{"nodes":[{"id":"a","kind":"transform","expr":"1"},{"id":"b","kind":"transform","expr":"2"},{"id":"j","kind":"transform","expr":"$in.x + $in.y"},{"id":"o","kind":"output"}],"edges":[{"source":"a","target":"j","targetPort":"x"},{"source":"b","target":"j","targetPort":"y"},{"source":"j","target":"o"}]}`,
			input:  `null`,
			output: `3`,
		},
		{
			name:   "dead path skips transitively",
			ir:     `{"nodes":[{"id":"r","kind":"router","select":"\"a\"","handles":["a","b"]},{"id":"x","kind":"transform","expr":"1"},{"id":"y","kind":"transform","expr":"$in.in + 1"},{"id":"o","kind":"output","value":"done"}],"edges":[{"source":"r","sourcePort":"b","target":"x"},{"source":"x","target":"y"},{"source":"r","sourcePort":"a","target":"o"}]}`,
			input:  `null`,
			output: `"done"`,
		},
		{
			name:  "cycle is invalid",
			ir:    `{"nodes":[{"id":"a","kind":"transform","expr":"1"},{"id":"b","kind":"transform","expr":"1"}],"edges":[{"source":"a","target":"b"},{"source":"b","target":"a"}]}`,
			input: `null`, code: "invalid_ir",
		},
		{
			name:  "unknown kind",
			ir:    `{"nodes":[{"id":"a","kind":"teleport"}],"edges":[]}`,
			input: `null`, code: "invalid_ir", node: "a",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Deps{})
			res := runG(t, e, mustGraph(t, tc.ir), mustJSON(t, tc.input), &recorder{}, nil)
			if tc.code != "" {
				wantCode(t, res, tc.code, tc.node)
				return
			}
			wantOutput(t, res, tc.output)
			if !strings.Contains(res.Note, tc.note) {
				t.Fatalf("note %q, want it to contain %q", res.Note, tc.note)
			}
			if tc.note == "" && res.Note != "" {
				t.Fatalf("unexpected note %q", res.Note)
			}
		})
	}
}

func TestTemplateErrorNamesTokenAndMissing(t *testing.T) {
	g := mustGraph(t, `{"nodes":[{"id":"o","kind":"output","value":"hi $in.in.user.name"}],"edges":[]}`)
	ae := wantCode(t, runG(t, New(Deps{}), g, mustJSON(t, `{"user":{}}`), nil, nil), "template_error", "o")
	d := ae.Details.(map[string]any)
	if d["token"] != "$in.in.user.name" || d["missing"] != "$in.in.user.name" || d["field"] != "value" {
		t.Fatalf("details %v", d)
	}
}

// gate is a node stand-in that blocks until released and records start/end order.
type orderLog struct {
	mu  sync.Mutex
	seq []string
}

func (l *orderLog) add(s string) {
	l.mu.Lock()
	l.seq = append(l.seq, s)
	l.mu.Unlock()
}

// blockingModel is a ModelClient whose calls block until the test releases them.
func TestBranchesOverlap(t *testing.T) {
	// Two llm branches whose model calls both wait until both have started: they can only
	// finish if they run at the same time.
	var started sync.WaitGroup
	started.Add(2)
	models := modelFunc(func(ctx context.Context, prompt string, emit func(string)) (string, error) {
		started.Done()
		started.Wait()
		return "ok " + prompt, nil
	})
	g := mustGraph(t, `{"nodes":[
		{"id":"a","kind":"llm","model":"m","prompt":"a"},
		{"id":"b","kind":"llm","model":"m","prompt":"b"},
		{"id":"j","kind":"transform","expr":"[$in.x.text, $in.y.text]"},
		{"id":"o","kind":"output"}],
	  "edges":[{"source":"a","target":"j","targetPort":"x"},{"source":"b","target":"j","targetPort":"y"},{"source":"j","target":"o"}]}`)
	rec := &recorder{}
	res := runG(t, New(Deps{Models: models}), g, nil, rec, nil)
	wantOutput(t, res, `["ok a","ok b"]`)
	// Both started before either finished.
	var order []string
	for _, ev := range rec.all() {
		if ev.NodeID == "a" || ev.NodeID == "b" {
			order = append(order, string(ev.Type))
		}
	}
	if strings.Join(order[:2], ",") != "node.started,node.started" {
		t.Fatalf("event order %v", order)
	}
}

func TestMaxParallelOneSerialises(t *testing.T) {
	log := &orderLog{}
	models := modelFunc(func(ctx context.Context, prompt string, emit func(string)) (string, error) {
		log.add("start " + prompt)
		log.add("end " + prompt)
		return prompt, nil
	})
	g := mustGraph(t, `{"nodes":[{"id":"a","kind":"llm","model":"m","prompt":"a"},{"id":"b","kind":"llm","model":"m","prompt":"b"}],"edges":[]}`)
	res := runG(t, New(Deps{Models: models, MaxParallel: 1}), g, nil, nil, nil)
	if res.Status != StatusCompleted {
		t.Fatalf("res %+v", res)
	}
	for i := 0; i < len(log.seq); i += 2 {
		if strings.TrimPrefix(log.seq[i], "start ") != strings.TrimPrefix(log.seq[i+1], "end ") {
			t.Fatalf("interleaved: %v", log.seq)
		}
	}
}

func TestCancellationStopsRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	entered := make(chan struct{})
	models := modelFunc(func(ctx context.Context, prompt string, emit func(string)) (string, error) {
		close(entered)
		<-ctx.Done()
		return "", ctx.Err()
	})
	g := mustGraph(t, `{"nodes":[{"id":"a","kind":"llm","model":"m","prompt":"a"},{"id":"o","kind":"output"}],"edges":[{"source":"a","target":"o"}]}`)
	done := make(chan Result)
	go func() { done <- New(Deps{Models: models}).Run(ctx, Spec{Graph: g}) }()
	<-entered
	cancel()
	res := <-done
	if res.Status != StatusFailed || !errors.Is(res.Err, ErrCanceled) || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("res %+v", res)
	}
}

func TestFirstDeclaredEdgeWinsOnSharedPort(t *testing.T) {
	g := mustGraph(t, `{"nodes":[{"id":"a","kind":"transform","expr":"\"a\""},{"id":"b","kind":"transform","expr":"\"b\""},{"id":"o","kind":"output"}],
		"edges":[{"source":"b","target":"o"},{"source":"a","target":"o"}]}`)
	for i := 0; i < 20; i++ {
		wantOutput(t, runG(t, New(Deps{}), g, nil, nil, nil), `"b"`)
	}
}

func TestEventsCarryPayloads(t *testing.T) {
	rec := &recorder{}
	wantOutput(t, runG(t, New(Deps{}), mustGraph(t, greeterIR), mustJSON(t, `{"name":"Ada"}`), rec, nil), `"Hello, Ada"`)
	fin := rec.of(EventNodeFinished, "shape")
	if len(fin) != 1 || asJSON(fin[0].Input) != `{"in":{"name":"Ada"}}` || asJSON(fin[0].Output) != `{"out":{"greeting":"Hello, Ada"}}` {
		t.Fatalf("finished %+v", fin)
	}
	if fin[0].Start.IsZero() || fin[0].End.Before(fin[0].Start) || fin[0].Kind != graph.KindTransform || fin[0].RunID != "run_test" {
		t.Fatalf("finished %+v", fin[0])
	}
	if len(rec.of(EventNodeStarted, "")) != 2 {
		t.Fatalf("events %+v", rec.all())
	}
}

func TestRunFailureCancelsOtherBranches(t *testing.T) {
	models := modelFunc(func(ctx context.Context, prompt string, emit func(string)) (string, error) {
		<-ctx.Done() // only returns because the failing branch cancelled the run
		return "", ctx.Err()
	})
	g := mustGraph(t, `{"nodes":[{"id":"slow","kind":"llm","model":"m","prompt":"x"},{"id":"bad","kind":"transform","expr":"$in.in.nope"}],"edges":[]}`)
	rec := &recorder{}
	res := runG(t, New(Deps{Models: models}), g, mustJSON(t, `{}`), rec, nil)
	ae := wantCode(t, res, "transform_error", "bad")
	if !strings.Contains(ae.Message, `field "nope" is absent`) {
		t.Fatalf("message %q", ae.Message)
	}
	// The slow branch either never got going or was cancelled; it never finished.
	if ev := rec.of(EventNodeFailed, "slow"); len(rec.of(EventNodeStarted, "slow")) != len(ev) || len(ev) == 1 && ev[0].Error.Code != "run_canceled" {
		t.Fatalf("slow branch events %+v", rec.all())
	}
	if len(rec.of(EventNodeFinished, "slow")) != 0 {
		t.Fatal("slow branch finished")
	}
}

func TestValidatedExamplesRun(t *testing.T) {
	for _, src := range []string{greeterIR, triageIR, humanIR} {
		g, problems := graph.Validate([]byte(src))
		if len(problems) > 0 {
			t.Fatalf("validate: %v", problems)
		}
		if RequiresDurable(g) {
			continue
		}
		if res := New(Deps{}).Run(context.Background(), Spec{Graph: g, Input: mustJSON(t, `{"name":"Ada","kind":"question","title":"t"}`)}); res.Status != StatusCompleted {
			t.Fatalf("%+v", res)
		}
	}
}

func TestPlanCacheIsBoundedAndShared(t *testing.T) {
	c := newPlanCache(2)
	a, b := mustGraph(t, greeterIR), mustGraph(t, triageIR)
	p1, err := c.get(a, "")
	if err != nil {
		t.Fatal(err)
	}
	// Same content, different pointer: the compiled plan is reused.
	if p2, _ := c.get(mustGraph(t, greeterIR), ""); p2 != p1 {
		t.Fatal("equal graphs compiled twice")
	}
	_, _ = c.get(b, "")
	_, _ = c.get(mustGraph(t, humanIR), "")
	if len(c.plans) > 2 {
		t.Fatalf("cache holds %d plans, bound is 2", len(c.plans))
	}
}

func TestNilGraph(t *testing.T) {
	wantCode(t, New(Deps{}).Run(context.Background(), Spec{}), "invalid_ir", "")
}

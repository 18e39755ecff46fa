package runtime

import "testing"

func TestRequiresDurable(t *testing.T) {
	if RequiresDurable(mustGraph(t, greeterIR)) || RequiresDurable(nil) {
		t.Fatal("greeter needs no durable mode")
	}
	if !RequiresDurable(mustGraph(t, humanIR)) {
		t.Fatal("human graph needs durable mode")
	}
}

func TestAnswerNodes(t *testing.T) {
	g := mustGraph(t, `{"nodes":[
	  {"id":"plan","kind":"llm","model":"m","prompt":"p"},
	  {"id":"write","kind":"llm","model":"m","prompt":"$in.in.text"},
	  {"id":"side","kind":"llm","model":"m","prompt":"s"},
	  {"id":"shape","kind":"transform","expr":"$in.in.text"},
	  {"id":"out","kind":"output"}],
	 "edges":[{"source":"plan","target":"write"},{"source":"write","target":"shape"},{"source":"shape","target":"out"}]}`)
	got := AnswerNodes(g)
	if got["plan"] || !got["write"] || got["side"] || len(got) != 1 {
		t.Fatalf("answer nodes %v", got)
	}
}

package cmd

import (
	"context"
	"sync"

	"github.com/svc-dev/svc/modules/agents"
	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/modules/runs"
	"github.com/svc-dev/svc/modules/sessions"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/client"
)

// buildRuns builds the sessions and runs modules. exec carries the graph runtime's
// collaborators (connections, tool servers, subgraph loader); its Models is set here to the
// inference plane's client.
func buildRuns(d *deps, agentStore *agents.Service, exec runtime.Deps, observers ...runs.Observer) (*runs.Module, *sessions.Module, *runs.Durable, error) {
	sessionStore, err := sessions.NewService(d.db)
	if err != nil {
		return nil, nil, nil, err
	}
	runStore, err := runs.NewStore(d.db)
	if err != nil {
		return nil, nil, nil, err
	}
	inference := client.NewInference(d.cfg.InferenceURL, nil)
	exec.Models = inference
	runAgents := newRunAgents(agentStore)
	// Subgraph nodes (durable runs only) load saved agents through the same resolver.
	exec.Agents = runs.SubgraphLoader(runAgents)
	executor := runtime.New(exec)
	// Durable mode: its endpoints are always mounted (they answer durable_required when
	// SERVICE_DURABLE is off); its worker runs only when it is on.
	durable, err := runs.NewDurable(runs.DurableOptions{
		DB: d.db, Store: runStore, Executor: executor, Agents: runAgents, Sessions: runSessions{sessionStore},
		Observers: observers, Enabled: d.cfg.Durable, Lease: d.cfg.DurableLease,
		Logger: d.log.With().Str("module", "runs").Logger(),
	})
	if err != nil {
		return nil, nil, nil, err
	}
	svc, err := runs.NewService(runs.Options{
		Store:       runStore,
		Executor:    executor,
		Models:      inference,
		Agents:      runAgents,
		Sessions:    runSessions{sessionStore},
		Observers:   observers,
		DurableMode: d.cfg.Durable,
		Durable:     durable,
		Lease:       d.cfg.RunLease,
		Owner:       durable.Owner(), // one lease owner id per process, durable or not
		Logger:      d.log.With().Str("module", "runs").Logger(),
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return runs.New(svc, runs.ModuleOptions{InvokeToken: d.cfg.InvokeToken}), sessions.New(sessionStore), durable, nil
}

// runSessions adapts the sessions service to runs.Sessions.
type runSessions struct{ svc *sessions.Service }

var _ runs.Sessions = runSessions{}

func (s runSessions) Exists(ctx context.Context, id string) error { return s.svc.Exists(ctx, id) }

func (s runSessions) Append(ctx context.Context, id, user, assistant string) error {
	return s.svc.Append(ctx, id, user, assistant)
}

func (s runSessions) History(ctx context.Context, id string) ([]runs.HistoryMessage, error) {
	h, err := s.svc.History(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]runs.HistoryMessage, len(h))
	for i, m := range h {
		out[i] = runs.HistoryMessage{Role: m.Role, Content: m.Content}
	}
	return out, nil
}

// runAgents adapts the agents service to runs.Agents. Versions are immutable and content
// addressed, so decoded graphs are cached by content hash.
type runAgents struct {
	svc *agents.Service
	mu  sync.Mutex
	g   map[string]*graph.Graph
}

// maxCachedGraphs bounds the decoded-graph cache.
const maxCachedGraphs = 512

func newRunAgents(svc *agents.Service) *runAgents {
	return &runAgents{svc: svc, g: map[string]*graph.Graph{}}
}

var _ runs.Agents = (*runAgents)(nil)

func (a *runAgents) Resolve(ctx context.Context, id, version, contentHash string) (runs.AgentVersion, error) {
	v, err := a.svc.Resolve(ctx, id, version, contentHash)
	if err != nil {
		return runs.AgentVersion{}, err
	}
	a.mu.Lock()
	g, ok := a.g[v.ContentHash]
	a.mu.Unlock()
	if !ok {
		g, err = graph.Decode(v.IR)
		if err != nil {
			return runs.AgentVersion{}, apperr.ErrInternal.Msg("stored agent version is unreadable").Wrap(err)
		}
		a.mu.Lock()
		if len(a.g) >= maxCachedGraphs {
			for k := range a.g {
				delete(a.g, k)
				break
			}
		}
		a.g[v.ContentHash] = g
		a.mu.Unlock()
	}
	return runs.AgentVersion{AgentID: v.AgentID, Version: v.Version, ContentHash: v.ContentHash, Graph: g}, nil
}

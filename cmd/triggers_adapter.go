package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/svc-dev/svc/modules/agents"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/modules/runs"
	"github.com/svc-dev/svc/modules/triggers"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/secrets"
)

// buildTriggers builds the triggers module: pins resolve through the agents store, runs
// start through the runs service (which picks a durable run when durable mode is on and
// the pinned version needs it), and on PostgreSQL a session advisory lock elects the one
// replica that fires schedules.
func buildTriggers(d *deps, agentStore *agents.Service, runSvc *runs.Service) (*triggers.Module, error) {
	logger := d.log.With().Str("module", "triggers").Logger()
	svc, err := triggers.NewService(d.db, d.keys, triggerPins{agentStore}, triggerRuns{runSvc}, logger, triggers.Options{Durable: d.cfg.Durable})
	if err != nil {
		return nil, err
	}
	var opts triggers.SchedulerOptions
	if d.db.Dialect == database.Postgres {
		opts.Elector = triggers.NewSchemaElector(d.db.SQL())
	}
	sched, err := triggers.NewScheduler(svc, logger, opts)
	if err != nil {
		return nil, err
	}
	return triggers.New(svc, sched, logger)
}

// triggerPins adapts the agents store to triggers.AgentPins.
type triggerPins struct{ agents *agents.Service }

var _ triggers.AgentPins = triggerPins{}

func (p triggerPins) ResolvePin(ctx context.Context, agentID, version, contentHash string) (triggers.Pin, error) {
	v, err := p.agents.Resolve(ctx, agentID, version, contentHash)
	if err != nil {
		return triggers.Pin{}, err
	}
	g, _, err := agents.CheckIR(v.IR)
	if err != nil {
		// A stored version always validated when it was published.
		return triggers.Pin{}, fmt.Errorf("stored version %s of agent %q no longer validates: %w", v.Version, agentID, err)
	}
	return triggers.Pin{Version: v.Version, ContentHash: v.ContentHash, NeedsDurable: runtime.RequiresDurable(g)}, nil
}

// triggerRuns adapts the runs service to triggers.RunStarter.
type triggerRuns struct{ runs *runs.Service }

var _ triggers.RunStarter = triggerRuns{}

func (r triggerRuns) StartTriggeredRun(ctx context.Context, req triggers.RunRequest) (string, error) {
	var in any
	if err := json.Unmarshal(req.Input, &in); err != nil {
		// Syntactically valid JSON can still fail to decode (a number beyond float64, such
		// as 1e400, in a signed webhook body): that is the sender's input, a 400.
		return "", apperr.Invalid("trigger %s: the run input cannot be decoded: %s", req.TriggerID, strings.TrimPrefix(err.Error(), "json: "))
	}
	return r.runs.StartAgentRun(ctx, runs.AgentRunRequest{
		AgentID: req.AgentID, Version: req.Version, ContentHash: req.ContentHash,
		Input: in, TriggerID: req.TriggerID,
	})
}

// triggerSecrets is the webhook secrets' table for `svc secrets rotate`.
type triggerSecrets struct{ db *database.DB }

// Rotate implements secretStore.
func (t triggerSecrets) Rotate(ctx context.Context, keys *secrets.Keyring) (int, error) {
	return triggers.RotateSecrets(ctx, t.db, keys)
}

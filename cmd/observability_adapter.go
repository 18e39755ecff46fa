package cmd

import (
	"context"
	"errors"
	"time"

	"github.com/svc-dev/svc/modules/agents"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/modules/observability"
	"github.com/svc-dev/svc/modules/runs"
	"github.com/svc-dev/svc/platform/metrics"
)

// processMetrics returns the process's metrics registry, built on first use (serve builds it
// once; tests that assemble planes from bare deps get one too).
func (d *deps) processMetrics() *metrics.Metrics {
	if d.metrics == nil {
		d.metrics = metrics.New()
	}
	return d.metrics
}

// buildObservability builds the span recorder (the runs module's observer), its HTTP module and,
// when SERVICE_OTLP_ENDPOINT is set, the OpenTelemetry exporter.
func buildObservability(ctx context.Context, d *deps, agentStore *agents.Service) (*observability.Module, runs.Observer, error) {
	log := d.log.With().Str("module", "observability").Logger()
	m, err := observability.NewMetrics(d.processMetrics().Registry())
	if err != nil {
		return nil, nil, err
	}
	opts := observability.RecorderOptions{
		DB:       d.db,
		Bus:      d.bus,
		Policies: obsPolicies{agentStore},
		Log:      log,
		Metrics:  m,
	}
	if d.cfg.OTLPEndpoint != "" {
		exp, err := observability.NewOTLPExporter(ctx, d.cfg.OTLPEndpoint, version)
		if err != nil {
			return nil, nil, err
		}
		opts.Exporter = exp
		d.closer = append(d.closer, func() error {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return exp.Shutdown(sctx)
		})
		log.Info().Msg("exporting traces over OTLP/HTTP")
	}
	rec := observability.NewRecorder(opts)
	runStore, err := runs.NewStore(d.db)
	if err != nil {
		return nil, nil, err
	}
	svc := observability.NewService(rec, obsRuns{runStore})
	return observability.NewModule(observability.ModuleOptions{Service: svc, Log: log}), obsObserver{rec}, nil
}

// obsObserver adapts the recorder to runs.Observer (the two packages keep identical structs
// so neither imports the other).
type obsObserver struct{ rec *observability.Recorder }

var _ runs.Observer = obsObserver{}

func (o obsObserver) RunStarted(ctx context.Context, info runs.RunInfo) runtime.EventSink {
	return o.rec.RunStarted(ctx, observability.RunInfo(info))
}

func (o obsObserver) RunFinished(ctx context.Context, info runs.RunInfo, res runs.RunOutcome) {
	o.rec.RunFinished(ctx, observability.RunInfo(info), observability.RunOutcome(res))
}

// obsPolicies adapts the agents service to observability.PolicySource.
type obsPolicies struct{ svc *agents.Service }

func (p obsPolicies) IOPolicy(ctx context.Context, agentID string) (observability.Policy, error) {
	pol, err := p.svc.GetPolicy(ctx, agentID)
	if err != nil {
		if errors.Is(err, agents.ErrAgentNotFound) {
			// Agents are never deleted; an unknown id is a run without an agent record.
			return observability.DefaultPolicy(), nil
		}
		return observability.Policy{}, err
	}
	return observability.Policy{Capture: pol.IOCapture, RetentionSeconds: pol.IORetentionSeconds, Redact: pol.Redact}, nil
}

// obsRuns adapts the runs store to observability.RunLookup.
type obsRuns struct{ store *runs.Store }

func (r obsRuns) RunStatus(ctx context.Context, id string) (string, bool, error) {
	run, err := r.store.Get(ctx, id)
	if errors.Is(err, runs.ErrRunNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return run.Status, true, nil
}

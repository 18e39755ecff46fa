package cmd

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/svc-dev/svc/modules/agents"
	"github.com/svc-dev/svc/modules/artifacts"
	"github.com/svc-dev/svc/modules/bench"
	"github.com/svc-dev/svc/modules/catalog"
	"github.com/svc-dev/svc/modules/connections"
	"github.com/svc-dev/svc/modules/credentials"
	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/engines"
	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/modules/health"
	"github.com/svc-dev/svc/modules/mcp"
	"github.com/svc-dev/svc/modules/models"
	"github.com/svc-dev/svc/platform/httpx"
	"github.com/svc-dev/svc/web"
)

// buildControl is the control plane's composition root: it lists the modules mounted.
func buildControl(ctx context.Context, d *deps) (*plane, error) {
	e := httpx.NewEcho(httpx.Options{
		Logger:      d.log.With().Str("plane", "control").Logger(),
		CORSOrigins: d.cfg.CORSOrigins,
		BodyLimit:   d.cfg.BodyLimit,
		// Uploads stream to disk under their own limit (SERVICE_ARTIFACT_MAX_BYTES).
		BodyLimitSkip: artifacts.SkipBodyLimit,
	})
	p := &plane{name: "control", addr: d.cfg.ControlAddr, echo: e}
	artifactStore, err := artifacts.NewService(d.db, filepath.Join(d.cfg.DataDir, "artifacts"), d.cfg.ArtifactMaxBytes, d.log)
	if err != nil {
		return nil, err
	}
	// connectionStore is also the graph runtime's ConnectionResolver (see runtimeConnections).
	connectionStore, err := connections.NewService(d.db, d.keys, d.log.With().Str("module", "connections").Logger())
	if err != nil {
		return nil, err
	}
	agentStore, err := agents.NewService(d.db)
	if err != nil {
		return nil, err
	}
	benchStore, err := bench.NewService(d.db)
	if err != nil {
		return nil, err
	}
	// toolServers is also the graph runtime's MCPCaller (mcp tool nodes).
	toolServers := mcp.NewService(d.db, d.keys, mcpConnections{connectionStore}, d.log.With().Str("module", "mcp").Logger())
	// Spans, node I/O and run metrics; the recorder observes every run (cmd/observability_adapter.go).
	observabilityModule, runObserver, err := buildObservability(ctx, d, agentStore)
	if err != nil {
		return nil, err
	}
	// Runs execute graphs with the runtime's collaborators; see buildRuns (cmd/runs_adapter.go).
	runModule, sessionModule, durableModule, err := buildRuns(d, agentStore, runtime.Deps{
		Connections: runtimeConnections{connectionStore},
		MCP:         toolServers,
	}, runObserver)
	if err != nil {
		return nil, err
	}
	// Triggers start runs of pinned agent versions on schedules and webhooks (cmd/triggers_adapter.go).
	triggerModule, err := buildTriggers(d, agentStore, runModule.Service())
	if err != nil {
		return nil, err
	}
	// The browser UI at /ui/, with a same-origin pass-through to the inference admin API.
	uiModule, err := web.New(d.cfg.InferenceURL)
	if err != nil {
		return nil, err
	}
	p.modules = []httpx.Module{
		uiModule,
		agents.New(agentStore),
		artifacts.New(artifactStore),
		bench.New(benchStore),
		connections.New(connectionStore),
		mcp.New(toolServers),
		runModule,
		durableModule,
		sessionModule,
		triggerModule,
		observabilityModule,
		d.processMetrics().Module(),
		health.New(nil,
			health.Check{Name: "database", Fn: d.db.Ready},
			health.Check{Name: "inference", Fn: inferenceHealth(d.cfg.InferenceURL)},
		),
	}
	e.Pre(d.processMetrics().Middleware("control"))
	if err := p.mount(d, "svc control plane"); err != nil {
		return nil, err
	}
	return p, nil
}

// buildInference is the inference plane's composition root.
func buildInference(ctx context.Context, d *deps) (*plane, error) {
	e := httpx.NewEcho(httpx.Options{
		Logger:       d.log.With().Str("plane", "inference").Logger(),
		CORSOrigins:  d.cfg.CORSOrigins,
		BodyLimit:    d.cfg.BodyLimit,
		OpenAIPrefix: "/v1/",
		// /v1 bodies (inline images, audio uploads) have the data plane's own limits.
		BodyLimitSkip: dataplane.SkipBodyLimit,
	})
	p := &plane{name: "inference", addr: d.cfg.InferenceAddr, echo: e}
	credSvc := credentials.New(d.db, d.keys, os.Getenv)
	// Local engines are child processes: the closer stops them (their process groups) on shutdown.
	engineSvc := engines.New(engines.Options{MaxResident: d.cfg.MaxResident})
	d.closer = append(d.closer, engineSvc.Close)
	modelSvc := models.New(d.db, engineSvc, credSvc, models.Options{})
	dataPlane, err := dataplane.New(dataplane.Options{
		Models:      dataplaneModels{modelSvc},
		Credentials: dataplaneCredentials{credSvc},
		Bindings:    localBindings(modelSvc, engineSvc),
		Timeout:     d.cfg.UpstreamTimeout,
		Logger:      d.log.With().Str("plane", "inference").Str("module", "dataplane").Logger(),
	})
	if err != nil {
		return nil, err
	}
	// The model catalog installs hub models into $SERVICE_DATA_DIR/models and registers them
	// (cmd/catalog.go); its closer fails in-flight downloads as interrupted.
	catalogSvc, err := newCatalog(ctx, d, modelSvc)
	if err != nil {
		return nil, err
	}
	p.modules = []httpx.Module{
		// /readyz stays 200 while the database is up and any engine is available.
		health.New(engineSvc.Report,
			health.Check{Name: "database", Fn: d.db.Ready},
			health.Check{Name: "engines", Fn: engineSvc.AnyReady},
		),
		models.NewModule(modelSvc),
		credentials.NewModule(credSvc),
		engines.NewModule(engineSvc),
		catalog.NewModule(catalogSvc),
		dataPlane,
		d.processMetrics().Module(),
	}
	e.Pre(d.processMetrics().Middleware("inference"))
	if err := d.processMetrics().ResidentEngines(func() float64 { return float64(len(engineSvc.Resident())) }); err != nil {
		return nil, err
	}
	if err := p.mount(d, "svc inference plane"); err != nil {
		return nil, err
	}
	return p, nil
}

func inferenceHealth(base string) func(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("inference plane unreachable at %s", base)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("inference plane /healthz answered %d", resp.StatusCode)
		}
		return nil
	}
}

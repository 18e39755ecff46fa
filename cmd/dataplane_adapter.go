package cmd

import (
	"context"

	"github.com/svc-dev/svc/modules/credentials"
	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/engines"
	"github.com/svc-dev/svc/modules/models"
)

// dataplaneModels adapts the model registry to the data plane's view of it.
type dataplaneModels struct{ svc *models.Service }

func (a dataplaneModels) Lookup(ctx context.Context, id string) (dataplane.Target, error) {
	m, err := a.svc.Resolve(ctx, id) // 404 model_not_found (with engine-name hints) when absent
	if err != nil {
		return dataplane.Target{}, err
	}
	return toTarget(m), nil
}

func (a dataplaneModels) List(ctx context.Context) ([]dataplane.Target, error) {
	ms, err := a.svc.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]dataplane.Target, 0, len(ms))
	for _, m := range ms {
		out = append(out, toTarget(m))
	}
	return out, nil
}

func toTarget(m *models.Model) dataplane.Target {
	t := dataplane.Target{
		LogicalID: m.ID, Binding: string(m.Binding), BaseURL: m.BaseURL, Model: m.Model,
		MaxTokens: m.MaxTokens, CredentialRef: m.CredentialRef, CreatedAt: m.CreatedAt,
	}
	for _, mod := range m.Modalities {
		t.Modalities = append(t.Modalities, string(mod))
	}
	return t
}

// dataplaneCredentials adapts the credential store (store first, then environment).
type dataplaneCredentials struct{ svc *credentials.Service }

func (a dataplaneCredentials) Resolve(ctx context.Context, ref string) (string, error) {
	return a.svc.ResolveRef(ctx, ref)
}

// localBinding serves the local-engine bindings through the engines supervisor: it leases
// a resident engine (or a per-request runner) and gives it back in Upstream.Release.
type localBinding struct {
	models  *models.Service
	engines *engines.Service
}

func (a localBinding) Acquire(ctx context.Context, t dataplane.Target) (*dataplane.Upstream, error) {
	// The target carries no engine settings (modelPath, voice): read the registration.
	m, err := a.models.Resolve(ctx, t.LogicalID)
	if err != nil {
		return nil, err
	}
	l, err := a.engines.Acquire(ctx, m)
	if err != nil {
		if ctx.Err() != nil {
			return nil, dataplane.ErrClientGone.Wrap(ctx.Err())
		}
		return nil, err
	}
	// llama-server ignores the model field; the logical id is sent so its answers name it.
	return &dataplane.Upstream{BaseURL: l.BaseURL, Model: m.ID, MaxTokens: m.MaxTokens, Release: l.Release, Transport: l.Transport}, nil
}

// localBindings maps every local binding name to the supervisor.
func localBindings(ms *models.Service, es *engines.Service) map[string]dataplane.Binding {
	out := map[string]dataplane.Binding{}
	for _, b := range models.KnownBindings() {
		if models.IsLocal(b) {
			out[string(b)] = localBinding{models: ms, engines: es}
		}
	}
	return out
}

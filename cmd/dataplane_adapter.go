package cmd

import (
	"context"

	"github.com/svc-dev/svc/modules/credentials"
	"github.com/svc-dev/svc/modules/dataplane"
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

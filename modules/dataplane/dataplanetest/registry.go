package dataplanetest

import (
	"context"
	"sort"
	"sync"

	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/platform/apperr"
)

// Models is an in-memory dataplane.Models.
type Models struct {
	mu      sync.Mutex
	targets map[string]dataplane.Target
}

// NewModels registers the targets by logical id.
func NewModels(targets ...dataplane.Target) *Models {
	m := &Models{targets: map[string]dataplane.Target{}}
	for _, t := range targets {
		m.Put(t)
	}
	return m
}

// Put registers or replaces a target (Binding defaults to hosted-compatible).
func (m *Models) Put(t dataplane.Target) {
	if t.Binding == "" {
		t.Binding = dataplane.BindingHosted
	}
	m.mu.Lock()
	m.targets[t.LogicalID] = t
	m.mu.Unlock()
}

// Lookup implements dataplane.Models.
func (m *Models) Lookup(_ context.Context, id string) (dataplane.Target, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.targets[id]
	if !ok {
		return dataplane.Target{}, dataplane.ErrModelNotFound.Msg("model %q is not registered", id)
	}
	return t, nil
}

// List implements dataplane.Models.
func (m *Models) List(context.Context) ([]dataplane.Target, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]dataplane.Target, 0, len(m.targets))
	for _, t := range m.targets {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LogicalID < out[j].LogicalID })
	return out, nil
}

// Credentials is an in-memory dataplane.Credentials keyed by ref ("secret://NAME").
type Credentials map[string]string

// Resolve implements dataplane.Credentials.
func (c Credentials) Resolve(_ context.Context, ref string) (string, error) {
	v, ok := c[ref]
	if !ok {
		return "", apperr.BadGateway("credential_error", "credential "+ref+" is not in the store nor the environment")
	}
	return v, nil
}

package models

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"gorm.io/gorm"
)

// State is the live state of a registered model as its engine reports it.
type State struct {
	// State is "remote" for hosted bindings; local engines report stopped, starting, ready,
	// busy, failed or unavailable (engine binary or model file missing).
	State string `json:"state"`
	// Detail says why, when there is something to say (e.g. the engine is not installed).
	Detail string `json:"detail,omitempty"`
}

// Live states.
const (
	StateRemote      = "remote"
	StateLoading     = "loading"
	StateResident    = "resident"
	StateIdle        = "idle"
	StateUnavailable = "unavailable"
	// Local engine states (the engines module's supervisor).
	StateStopped  = "stopped"
	StateStarting = "starting"
	StateReady    = "ready"
	StateBusy     = "busy"
	StateFailed   = "failed"
)

// Engines runs the models of each binding. The engines module implements it; hosted
// bindings have nothing to load, so their warm and evict are no-ops.
type Engines interface {
	// State reports the live state of m without changing it.
	State(ctx context.Context, m *Model) State
	// Warm loads m (a no-op for hosted bindings) and reports the resulting state.
	Warm(ctx context.Context, m *Model) (State, error)
	// Evict frees m's engine if it is loaded (a no-op for hosted bindings).
	Evict(ctx context.Context, m *Model) (State, error)
}

// CredentialResolver resolves a credentialRef (secret://NAME) to its value.
type CredentialResolver interface {
	ResolveRef(ctx context.Context, ref string) (string, error)
}

// engineNames are names people put in the model field by mistake; Resolve's 404 hints that
// the field is a logical id.
var engineNames = []string{"llama.cpp", "llama-server", "llama-cpp", "llamacpp", "whisper.cpp", "whisper-server", "whisper", "sd", "stable-diffusion.cpp", "sd.cpp", "espeak-ng", "espeak", "piper", "hosted-compatible", "ollama", "vllm"}

type row struct {
	ID        string `gorm:"primaryKey"`
	Binding   string
	Spec      string
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (row) TableName() string { return "inference_models" }

// stored is the JSON kept in the spec column: everything but id, revision and timestamps.
type stored struct {
	BaseURL       string     `json:"baseUrl,omitempty"`
	Model         string     `json:"model,omitempty"`
	CredentialRef string     `json:"credentialRef,omitempty"`
	MaxTokens     int        `json:"maxTokens,omitempty"`
	Modalities    []Modality `json:"modalities,omitempty"`
	ModelPath     string     `json:"modelPath,omitempty"`
	Args          []string   `json:"args,omitempty"`
	CtxSize       int        `json:"ctxSize,omitempty"`
	Voice         string     `json:"voice,omitempty"`
}

func (r *row) model() (*Model, error) {
	var s stored
	if err := json.Unmarshal([]byte(r.Spec), &s); err != nil {
		return nil, fmt.Errorf("model %s: stored spec: %w", r.ID, err)
	}
	return &Model{
		ID: r.ID, Binding: Binding(r.Binding), BaseURL: s.BaseURL, Model: s.Model,
		CredentialRef: s.CredentialRef, MaxTokens: s.MaxTokens, Modalities: s.Modalities,
		ModelPath: s.ModelPath, Args: s.Args, CtxSize: s.CtxSize, Voice: s.Voice,
		Revision: r.Revision, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}, nil
}

// Service is the model registry.
type Service struct {
	db      *database.DB
	engines Engines
	creds   CredentialResolver
	prober  *prober
}

// Options tune the service; zero values are fine.
type Options struct {
	// ProbeTimeout bounds each request of a capabilities probe (default 30s).
	ProbeTimeout time.Duration
}

// New builds the registry over db, with the engines that run models and the resolver of
// credential refs (used by the capabilities probe).
func New(db *database.DB, engines Engines, creds CredentialResolver, opts Options) *Service {
	if db == nil || engines == nil || creds == nil {
		panic("models.New: nil dependency")
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 30 * time.Second
	}
	s := &Service{db: db, engines: engines, creds: creds}
	s.prober = newProber(creds, opts.ProbeTimeout)
	return s
}

// Resolve returns the registered model for a logical id, or 404 model_not_found (with a
// hint when id is an engine name). The data plane calls it for every request.
func (s *Service) Resolve(ctx context.Context, id string) (*Model, error) {
	m, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, notFound(id)
	}
	return m, nil
}

func notFound(id string) *apperr.Error {
	shown := clip(id)
	if slices.Contains(engineNames, strings.ToLower(id)) {
		return ErrModelNotFound.Msg("model %q is not registered: %q is an engine name, but the model field is a logical id registered with PUT /admin/models/{id} (see GET /v1/models)", shown, shown).
			WithDetails(map[string]any{"model": shown, "hint": "use a registered logical id, not an engine name"})
	}
	return ErrModelNotFound.Msg("model %q is not registered (see GET /v1/models; register it with PUT /admin/models/{id})", shown).
		WithDetails(map[string]any{"model": shown})
}

func (s *Service) get(ctx context.Context, id string) (*Model, error) {
	if !ValidID(id) {
		return nil, nil
	}
	var r row
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if database.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.model()
}

// List returns every registered model, ordered by id.
func (s *Service) List(ctx context.Context) ([]*Model, error) {
	var rows []row
	if err := s.db.WithContext(ctx).Order("id").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]*Model, 0, len(rows))
	for i := range rows {
		m, err := rows[i].model()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Put registers or replaces id; created reports a new registration. A replaced model is
// evicted first so that a loaded engine never serves the old binding.
func (s *Service) Put(ctx context.Context, id string, spec *Spec) (m *Model, created bool, err error) {
	m, err = spec.Validate(id)
	if err != nil {
		return nil, false, err
	}
	if old, err := s.get(ctx, id); err != nil {
		return nil, false, err
	} else if old != nil {
		if _, err := s.engines.Evict(ctx, old); err != nil {
			return nil, false, err
		}
	}
	raw, err := json.Marshal(stored{BaseURL: m.BaseURL, Model: m.Model, CredentialRef: m.CredentialRef, MaxTokens: m.MaxTokens, Modalities: m.Modalities,
		ModelPath: m.ModelPath, Args: m.Args, CtxSize: m.CtxSize, Voice: m.Voice})
	if err != nil {
		return nil, false, err
	}
	// Two concurrent creates: the loser's insert hits the primary key and is retried as a
	// replace.
	for attempt := 0; ; attempt++ {
		err = s.db.Tx(ctx, func(tx *gorm.DB) error {
			now := time.Now().UTC()
			var cur row
			err := tx.Where("id = ?", id).Take(&cur).Error
			switch {
			case database.IsNotFound(err):
				r := row{ID: id, Binding: string(m.Binding), Spec: string(raw), Revision: 1, CreatedAt: now, UpdatedAt: now}
				if err := tx.Create(&r).Error; err != nil {
					return err
				}
				created = true
				m.Revision, m.CreatedAt, m.UpdatedAt = 1, now, now
				return nil
			case err != nil:
				return err
			}
			// revision+1 in SQL: concurrent replaces serialise on the row instead of losing a bump.
			res := tx.Model(&row{}).Where("id = ?", id).
				Updates(map[string]any{"binding": string(m.Binding), "spec": string(raw), "revision": gorm.Expr("revision + 1"), "updated_at": now})
			if res.Error != nil {
				return res.Error
			}
			if err := tx.Where("id = ?", id).Take(&cur).Error; err != nil {
				return err
			}
			created = false
			m.Revision, m.CreatedAt, m.UpdatedAt = cur.Revision, cur.CreatedAt.UTC(), cur.UpdatedAt.UTC()
			return nil
		})
		if err == nil || !database.IsDuplicate(err) || attempt >= 3 {
			break
		}
	}
	if err != nil {
		return nil, false, err
	}
	s.prober.forget(id)
	return m, created, nil
}

// Delete evicts id's engine, then unregisters it.
func (s *Service) Delete(ctx context.Context, id string) error {
	m, err := s.Resolve(ctx, id)
	if err != nil {
		return err
	}
	if _, err := s.engines.Evict(ctx, m); err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Where("id = ?", id).Delete(&row{})
	if res.Error != nil {
		return res.Error
	}
	s.prober.forget(id)
	if res.RowsAffected == 0 {
		return notFound(id)
	}
	return nil
}

// State reports m's live state.
func (s *Service) State(ctx context.Context, m *Model) State { return s.engines.State(ctx, m) }

// Warm pre-loads id's engine.
func (s *Service) Warm(ctx context.Context, id string) (*Model, State, error) {
	m, err := s.Resolve(ctx, id)
	if err != nil {
		return nil, State{}, err
	}
	st, err := s.engines.Warm(ctx, m)
	return m, st, err
}

// Evict frees id's engine.
func (s *Service) Evict(ctx context.Context, id string) (*Model, State, error) {
	m, err := s.Resolve(ctx, id)
	if err != nil {
		return nil, State{}, err
	}
	st, err := s.engines.Evict(ctx, m)
	return m, st, err
}

// Capabilities returns the probed capabilities of id, from the cache unless refresh is set
// or the model was replaced since the last probe.
func (s *Service) Capabilities(ctx context.Context, id string, refresh bool) (*Capabilities, error) {
	m, err := s.Resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.prober.capabilities(ctx, m, refresh)
}

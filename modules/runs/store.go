package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/svc-dev/svc/platform/database"
)

// Run statuses (SPEC.md "States and transitions").
const (
	StatusCreated   = "created"
	StatusStreaming = "streaming"
	StatusWaiting   = "waiting"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
)

// Run kinds.
const (
	KindPrompt = "prompt"
	KindGraph  = "graph"
	KindAgent  = "agent"
)

// validStatus lists the statuses GET /runs may filter by.
var validStatus = map[string]bool{StatusCreated: true, StatusStreaming: true, StatusWaiting: true, StatusCompleted: true, StatusFailed: true}

// NewID mints a run id: "run_" and a time-ordered UUID (v7) in hex, so ids sort by creation.
func NewID() string {
	return "run_" + strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", "")
}

// RunError is a failed run's error as records and stream frames carry it.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Run is a run record as GET /runs and GET /runs/{id} show it (snake_case).
type Run struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"`
	Kind         string          `json:"kind"`
	Input        json.RawMessage `json:"input"`
	Output       json.RawMessage `json:"output"`
	Error        *RunError       `json:"error"`
	Note         string          `json:"note"`
	Model        *string         `json:"model"`
	AgentID      *string         `json:"agent_id"`
	Version      *string         `json:"version"`
	ContentHash  *string         `json:"content_hash"`
	TriggerID    *string         `json:"trigger_id"`
	SessionID    *string         `json:"session_id"`
	AwaitingNode *string         `json:"awaiting_node"`
	Prompt       *string         `json:"prompt"`
	Durable      bool            `json:"durable"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	CompletedAt  *time.Time      `json:"completed_at"`
}

// row is the runs table.
type row struct {
	ID           string `gorm:"primaryKey"`
	Status       string
	Kind         string
	Input        *string
	Output       *string
	ErrorCode    *string
	ErrorMessage *string
	Note         string
	Model        *string
	AgentID      *string
	Version      *string
	ContentHash  *string
	TriggerID    *string
	SessionID    *string
	AwaitingNode *string
	Prompt       *string
	Durable      bool
	LeaseOwner   *string
	LeaseUntil   *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
	CompletedAt  *time.Time
}

func (row) TableName() string { return "runs" }

func (r *row) view() *Run {
	v := &Run{
		ID: r.ID, Status: r.Status, Kind: r.Kind, Note: r.Note, Model: r.Model, AgentID: r.AgentID,
		Version: r.Version, ContentHash: r.ContentHash, TriggerID: r.TriggerID, SessionID: r.SessionID,
		AwaitingNode: r.AwaitingNode, Prompt: r.Prompt, Durable: r.Durable,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, CompletedAt: r.CompletedAt,
	}
	v.Input = rawOrNull(r.Input)
	v.Output = rawOrNull(r.Output)
	if r.ErrorCode != nil {
		v.Error = &RunError{Code: *r.ErrorCode}
		if r.ErrorMessage != nil {
			v.Error.Message = *r.ErrorMessage
		}
	}
	return v
}

func rawOrNull(s *string) json.RawMessage {
	if s == nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(*s)
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// encodeJSON renders a value for a JSON column; nil stays NULL.
func encodeJSON(v any) (*string, error) {
	if v == nil {
		return nil, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	s := strings.TrimSuffix(b.String(), "\n")
	return &s, nil
}

// Store is the runs table: what the run API, triggers and durable mode read and write.
type Store struct {
	db  *database.DB
	now func() time.Time
}

// NewStore builds the store on an opened, migrated database.
func NewStore(db *database.DB) (*Store, error) {
	if db == nil {
		return nil, errors.New("runs: nil database")
	}
	return &Store{db: db, now: time.Now}, nil
}

// stamp is the current time at the precision both dialects keep (microseconds).
func (s *Store) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// NewRun describes a run to record.
type NewRun struct {
	ID          string // minted when empty
	Kind        string
	Input       any
	Model       string
	AgentID     string
	Version     string
	ContentHash string
	TriggerID   string
	SessionID   string
	Durable     bool
	// LeaseOwner and LeaseUntil give a non-durable run to the process executing it: the
	// owner renews the lease while the run is in flight, and the sweep of any replica fails
	// the run only once the lease has expired (its process died). Durable runs leave them
	// empty (their worker claims them).
	LeaseOwner string
	LeaseUntil time.Time
	// Status is created (the default: accepted, not yet executing) or streaming (a run
	// whose execution starts at once, which saves a write on the hot path).
	Status string
}

// Insert records a new run (status created unless n.Status says streaming) and returns it.
func (s *Store) Insert(ctx context.Context, n NewRun) (*Run, error) {
	if n.ID == "" {
		n.ID = NewID()
	}
	in, err := encodeJSON(n.Input)
	if err != nil {
		return nil, invalid("input", "is not serialisable as JSON")
	}
	status := StatusCreated
	if n.Status == StatusStreaming {
		status = StatusStreaming
	}
	now := s.stamp()
	r := row{
		ID: n.ID, Status: status, Kind: n.Kind, Input: in, Model: strPtr(n.Model),
		AgentID: strPtr(n.AgentID), Version: strPtr(n.Version), ContentHash: strPtr(n.ContentHash),
		TriggerID: strPtr(n.TriggerID), SessionID: strPtr(n.SessionID), Durable: n.Durable,
		CreatedAt: now, UpdatedAt: now,
	}
	if n.LeaseOwner != "" && !n.Durable {
		until := n.LeaseUntil.UTC().Truncate(time.Microsecond)
		r.LeaseOwner, r.LeaseUntil = &n.LeaseOwner, &until
	}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		return nil, err
	}
	return r.view(), nil
}

// MarkStreaming moves a created run to streaming (execution has begun).
func (s *Store) MarkStreaming(ctx context.Context, id string) error {
	return s.db.WithContext(ctx).Model(&row{}).Where("id = ? AND status = ?", id, StatusCreated).
		Updates(map[string]any{"status": StatusStreaming, "updated_at": s.stamp()}).Error
}

// MarkWaiting parks a run at a human node (durable mode).
func (s *Store) MarkWaiting(ctx context.Context, id, awaitingNode, prompt, note string) error {
	return s.db.WithContext(ctx).Model(&row{}).Where("id = ? AND status IN ?", id, []string{StatusCreated, StatusStreaming}).
		Updates(map[string]any{"status": StatusWaiting, "awaiting_node": awaitingNode, "prompt": prompt, "note": note, "updated_at": s.stamp()}).Error
}

// Finish records a run's end. Only an unfinished run (created, streaming or waiting) is
// changed, so a late writer cannot overwrite an end already recorded (by the sweep, say);
// finished reports whether this call recorded it.
func (s *Store) Finish(ctx context.Context, id string, out RunOutcome) (finished bool, err error) {
	fields := map[string]any{
		"status": out.Status, "note": out.Note, "updated_at": s.stamp(),
		"awaiting_node": nil, "prompt": nil, "lease_owner": nil, "lease_until": nil,
	}
	if out.CompletedAt.IsZero() {
		out.CompletedAt = s.stamp()
	}
	fields["completed_at"] = out.CompletedAt.UTC().Truncate(time.Microsecond)
	o, err := encodeJSON(out.Output)
	if err != nil {
		o = nil
		out.Note = joinNote(out.Note, "the output could not be stored as JSON")
		fields["note"] = out.Note
	}
	fields["output"] = o
	if out.ErrorCode != "" {
		fields["error_code"] = out.ErrorCode
		fields["error_message"] = out.ErrorMessage
	} else {
		fields["error_code"], fields["error_message"] = nil, nil
	}
	res := s.db.WithContext(ctx).Model(&row{}).
		Where("id = ? AND status IN ?", id, []string{StatusCreated, StatusStreaming, StatusWaiting}).
		Updates(fields)
	return res.RowsAffected > 0, res.Error
}

// Get returns one run.
func (s *Store) Get(ctx context.Context, id string) (*Run, error) {
	var r row
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if database.IsNotFound(err) {
		return nil, ErrRunNotFound.Msg("run %q not found", id).WithDetails(map[string]any{"id": id})
	}
	if err != nil {
		return nil, err
	}
	return r.view(), nil
}

// ListQuery selects runs for GET /runs; empty filters match everything.
type ListQuery struct {
	Limit     int
	Before    string
	AgentID   string
	Status    string
	SessionID string
	TriggerID string
}

// Page is one page of runs, newest first.
type Page struct {
	Runs []*Run `json:"runs"`
	Next string `json:"next,omitempty"`
}

// List returns runs newest first, filtered, keyset-paged by (created_at, id).
func (s *Store) List(ctx context.Context, q ListQuery) (Page, error) {
	if q.Limit <= 0 {
		q.Limit = 50
	}
	tx, err := database.Keyset(s.db.WithContext(ctx), "created_at", q.Limit, q.Before)
	if err != nil {
		return Page{}, invalid("before", "is not a cursor from a previous page")
	}
	if q.Status != "" {
		if !validStatus[q.Status] {
			return Page{}, invalid("status", "must be one of created, streaming, waiting, completed, failed")
		}
		tx = tx.Where("status = ?", q.Status)
	}
	if q.AgentID != "" {
		tx = tx.Where("agent_id = ?", q.AgentID)
	}
	if q.SessionID != "" {
		tx = tx.Where("session_id = ?", q.SessionID)
	}
	if q.TriggerID != "" {
		tx = tx.Where("trigger_id = ?", q.TriggerID)
	}
	var rows []row
	if err := tx.Find(&rows).Error; err != nil {
		return Page{}, err
	}
	p := Page{}
	rows, p.Next = database.NextPage(rows, q.Limit, func(r row) database.Cursor { return database.Cursor{At: r.CreatedAt, ID: r.ID} })
	p.Runs = make([]*Run, 0, len(rows))
	for i := range rows {
		p.Runs = append(p.Runs, rows[i].view())
	}
	return p, nil
}

// Sweep fails the non-durable runs still created or streaming whose process is gone: those
// whose lease expired before now (their owner stopped renewing it), and ownerless ones
// (recorded by a version without leases, or by a direct Insert) created before legacyBefore.
// Runs another live replica executes keep a fresh lease and are left alone, as are waiting
// and durable runs. The update is conditional on the lease, so a renewal and a sweep racing
// for the same row cannot both win.
func (s *Store) Sweep(ctx context.Context, now, legacyBefore time.Time) (int64, error) {
	now = now.UTC().Truncate(time.Microsecond)
	stamp := s.stamp()
	res := s.db.WithContext(ctx).Model(&row{}).
		Where("durable = ? AND status IN ?", false, activeStatuses).
		Where("(lease_until IS NOT NULL AND lease_until < ?) OR (lease_owner IS NULL AND lease_until IS NULL AND created_at < ?)", now, legacyBefore.UTC()).
		Updates(map[string]any{
			"status": StatusFailed, "error_code": ErrInterrupted.Code, "error_message": InterruptedMessage,
			"lease_owner": nil, "lease_until": nil, "updated_at": stamp, "completed_at": stamp,
		})
	return res.RowsAffected, res.Error
}

// RenewLeases extends to until the lease of every non-durable run owner holds that is still
// created or streaming, in one statement (the heartbeat of one process), and returns how many
// it extended. An expired lease nobody swept yet is renewed too: the run is still executing.
func (s *Store) RenewLeases(ctx context.Context, owner string, until time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Model(&row{}).
		Where("lease_owner = ? AND durable = ? AND status IN ?", owner, false, activeStatuses).
		Update("lease_until", until.UTC().Truncate(time.Microsecond))
	return res.RowsAffected, res.Error
}

// Held returns those of ids that are non-durable runs owner still holds, created or streaming.
func (s *Store) Held(ctx context.Context, owner string, ids []string) ([]string, error) {
	var held []string
	err := s.db.WithContext(ctx).Model(&row{}).
		Where("id IN ? AND lease_owner = ? AND durable = ? AND status IN ?", ids, owner, false, activeStatuses).
		Pluck("id", &held).Error
	return held, err
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// Package sessions keeps conversational sessions: an id, optional metadata and an ordered
// list of turns (a user message and the assistant's answer). Prompt runs with a session_id
// send the earlier turns along as history and append the finished turn.
package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/svc-dev/svc/platform/database"
	"gorm.io/gorm"
)

// Limits on client-supplied values.
const (
	maxMetadataBytes = 64 << 10
	// MaxHistoryTurns bounds the turns History returns (the most recent ones), so a long
	// session cannot grow a prompt without bound.
	MaxHistoryTurns = 200
)

// idPattern is the charset of session ids: safe in a URL path segment and a log line.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// Service stores sessions and their turns.
type Service struct {
	db  *database.DB
	now func() time.Time
}

// NewService builds the service on an opened, migrated database.
func NewService(db *database.DB) (*Service, error) {
	if db == nil {
		return nil, errors.New("sessions: nil database")
	}
	return &Service{db: db, now: time.Now}, nil
}

type sessionRow struct {
	ID        string `gorm:"primaryKey"`
	Metadata  string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (sessionRow) TableName() string { return "sessions" }

type turnRow struct {
	ID               int64 `gorm:"primaryKey;autoIncrement"`
	SessionID        string
	UserContent      string
	AssistantContent string
	CreatedAt        time.Time
}

func (turnRow) TableName() string { return "session_turns" }

// Session is a session as the API shows it. Messages is set on the detail only.
type Session struct {
	ID        string          `json:"id"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	Turns     int             `json:"turns"`
	Messages  []Message       `json:"messages,omitempty"`
}

// Message is one message of a session: each turn gives a user and an assistant message.
type Message struct {
	Role      string    `json:"role"`
	Content   string    `json:"content"`
	CreatedAt time.Time `json:"created_at"`
}

// Page is one page of sessions, newest activity first.
type Page struct {
	Sessions []Session `json:"sessions"`
	Next     string    `json:"next,omitempty"`
}

// EnsureInput is the body of POST /sessions.
type EnsureInput struct {
	ID       *string         `json:"id"`
	Metadata json.RawMessage `json:"metadata"`
}

// TurnInput is the body of POST /sessions/{id}/turns.
type TurnInput struct {
	UserContent      *string `json:"user_content"`
	AssistantContent *string `json:"assistant_content"`
}

// NewID mints a session id: "ses_" and a time-ordered UUID in hex.
func NewID() string {
	return "ses_" + strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", "")
}

// CheckID validates a client-supplied session id.
func CheckID(id string) error {
	if !idPattern.MatchString(id) {
		return invalid("id", "must be 1-128 characters of letters, digits, '_', '.', ':' or '-', starting with a letter or digit")
	}
	return nil
}

// stamp is the current time at the precision both dialects keep (microseconds), so a
// cursor made from a returned value matches the stored one.
func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Ensure creates the session, or returns the existing one unchanged (created false).
// An omitted id is minted.
func (s *Service) Ensure(ctx context.Context, in EnsureInput) (*Session, bool, error) {
	id := NewID()
	if in.ID != nil {
		id = *in.ID
		if err := CheckID(id); err != nil {
			return nil, false, err
		}
	}
	meta := []byte("{}")
	if m := bytes.TrimSpace(in.Metadata); len(m) > 0 && !bytes.Equal(m, []byte("null")) {
		if m[0] != '{' {
			return nil, false, invalid("metadata", "must be a JSON object")
		}
		if len(m) > maxMetadataBytes {
			return nil, false, invalid("metadata", "must be at most %d bytes", maxMetadataBytes)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, m); err != nil {
			return nil, false, invalid("metadata", "must be a JSON object")
		}
		meta = buf.Bytes()
	}
	now := s.stamp()
	row := sessionRow{ID: id, Metadata: string(meta), CreatedAt: now, UpdatedAt: now}
	err := s.db.WithContext(ctx).Create(&row).Error
	if database.IsDuplicate(err) {
		got, gerr := s.Get(ctx, id)
		if gerr != nil {
			return nil, false, gerr
		}
		got.Messages = nil
		return got, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &Session{ID: row.ID, Metadata: json.RawMessage(row.Metadata), CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}, true, nil
}

// List returns sessions, newest activity first.
func (s *Service) List(ctx context.Context, limit int, before string) (Page, error) {
	q, err := database.Keyset(s.db.WithContext(ctx), "updated_at", limit, before)
	if err != nil {
		return Page{}, invalid("before", "is not a cursor from a previous page")
	}
	var rows []sessionRow
	if err := q.Find(&rows).Error; err != nil {
		return Page{}, err
	}
	p := Page{}
	rows, p.Next = database.NextPage(rows, limit, func(r sessionRow) database.Cursor { return database.Cursor{At: r.UpdatedAt, ID: r.ID} })
	p.Sessions = make([]Session, 0, len(rows))
	if len(rows) == 0 {
		return p, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	var counts []struct {
		SessionID string
		N         int
	}
	if err := s.db.WithContext(ctx).Model(&turnRow{}).Select("session_id, COUNT(*) AS n").
		Where("session_id IN ?", ids).Group("session_id").Scan(&counts).Error; err != nil {
		return Page{}, err
	}
	byID := make(map[string]int, len(counts))
	for _, c := range counts {
		byID[c.SessionID] = c.N
	}
	for _, r := range rows {
		p.Sessions = append(p.Sessions, Session{ID: r.ID, Metadata: json.RawMessage(r.Metadata), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Turns: byID[r.ID]})
	}
	return p, nil
}

func (s *Service) row(ctx context.Context, tx *gorm.DB, id string) (*sessionRow, error) {
	var r sessionRow
	err := tx.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if database.IsNotFound(err) {
		return nil, ErrSessionNotFound.Msg("session %q not found", id).WithDetails(map[string]any{"id": id})
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Get returns the session with its messages in order.
func (s *Service) Get(ctx context.Context, id string) (*Session, error) {
	r, err := s.row(ctx, s.db.DB, id)
	if err != nil {
		return nil, err
	}
	var turns []turnRow
	if err := s.db.WithContext(ctx).Where("session_id = ?", id).Order("id").Find(&turns).Error; err != nil {
		return nil, err
	}
	out := &Session{ID: r.ID, Metadata: json.RawMessage(r.Metadata), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Turns: len(turns), Messages: make([]Message, 0, 2*len(turns))}
	for _, t := range turns {
		out.Messages = append(out.Messages,
			Message{Role: "user", Content: t.UserContent, CreatedAt: t.CreatedAt},
			Message{Role: "assistant", Content: t.AssistantContent, CreatedAt: t.CreatedAt})
	}
	return out, nil
}

// Exists reports ErrSessionNotFound for an unknown id, nil otherwise.
func (s *Service) Exists(ctx context.Context, id string) error {
	_, err := s.row(ctx, s.db.DB, id)
	return err
}

// History returns the session's earlier turns as chat messages (user, assistant, …),
// the most recent MaxHistoryTurns turns at most, oldest first.
func (s *Service) History(ctx context.Context, id string) ([]Message, error) {
	if _, err := s.row(ctx, s.db.DB, id); err != nil {
		return nil, err
	}
	var turns []turnRow
	if err := s.db.WithContext(ctx).Where("session_id = ?", id).Order("id DESC").Limit(MaxHistoryTurns).Find(&turns).Error; err != nil {
		return nil, err
	}
	out := make([]Message, 0, 2*len(turns))
	for i := len(turns) - 1; i >= 0; i-- {
		t := turns[i]
		out = append(out,
			Message{Role: "user", Content: t.UserContent, CreatedAt: t.CreatedAt},
			Message{Role: "assistant", Content: t.AssistantContent, CreatedAt: t.CreatedAt})
	}
	return out, nil
}

// AppendTurn validates and appends a turn; both contents must be non-blank.
func (s *Service) AppendTurn(ctx context.Context, id string, in TurnInput) (*Session, error) {
	if in.UserContent == nil || strings.TrimSpace(*in.UserContent) == "" {
		return nil, invalid("user_content", "is required and must not be blank")
	}
	if in.AssistantContent == nil || strings.TrimSpace(*in.AssistantContent) == "" {
		return nil, invalid("assistant_content", "is required and must not be blank")
	}
	if err := s.Append(ctx, id, *in.UserContent, *in.AssistantContent); err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}

// Append appends one turn and bumps the session's activity time, in one transaction.
func (s *Service) Append(ctx context.Context, id, user, assistant string) error {
	if strings.TrimSpace(user) == "" || strings.TrimSpace(assistant) == "" {
		return invalid("turn", "user and assistant content must both be non-blank")
	}
	now := s.stamp()
	return s.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&sessionRow{}).Where("id = ?", id).Update("updated_at", now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrSessionNotFound.Msg("session %q not found", id).WithDetails(map[string]any{"id": id})
		}
		return tx.Create(&turnRow{SessionID: id, UserContent: user, AssistantContent: assistant, CreatedAt: now}).Error
	})
}

// Delete removes the session and its turns; runs that named it keep existing with their
// session_id cleared (the foreign key's ON DELETE SET NULL).
func (s *Service) Delete(ctx context.Context, id string) error {
	return s.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Where("session_id = ?", id).Delete(&turnRow{}).Error; err != nil {
			return err
		}
		res := tx.Where("id = ?", id).Delete(&sessionRow{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrSessionNotFound.Msg("session %q not found", id).WithDetails(map[string]any{"id": id})
		}
		return nil
	})
}

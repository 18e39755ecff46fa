package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/svc-dev/svc/modules/graph"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"gorm.io/gorm"
)

// Service stores agents and their immutable versions.
type Service struct {
	db *database.DB
}

// NewService builds the service on an opened, migrated database.
func NewService(db *database.DB) (*Service, error) {
	if db == nil {
		return nil, errors.New("agents: nil database")
	}
	return &Service{db: db}, nil
}

type agentRow struct {
	ID                 string `gorm:"primaryKey"`
	Name               string
	IOCapture          string
	IORetentionSeconds *int64
	RedactRules        string
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

func (agentRow) TableName() string { return "agents" }

type versionRow struct {
	AgentID     string `gorm:"primaryKey"`
	Version     string `gorm:"primaryKey"`
	Seq         int
	ContentHash string
	IR          string `gorm:"column:ir"`
	Canvas      *string
	CreatedAt   time.Time
}

func (versionRow) TableName() string { return "agent_versions" }

// Agent is an agent with its versions (newest first).
type Agent struct {
	ID        string           `json:"id"`
	Name      string           `json:"name"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
	Latest    *VersionSummary  `json:"latest,omitempty"`
	Versions  []VersionSummary `json:"versions,omitempty"`
	IOPolicy  *IOPolicy        `json:"io_policy,omitempty"`
}

// VersionSummary names one version.
type VersionSummary struct {
	Version     string    `json:"version"`
	ContentHash string    `json:"content_hash"`
	CreatedAt   time.Time `json:"created_at"`
}

// Version is one stored version with its IR and canvas.
type Version struct {
	AgentID     string          `json:"agent_id"`
	Version     string          `json:"version"`
	ContentHash string          `json:"content_hash"`
	CreatedAt   time.Time       `json:"created_at"`
	IR          json.RawMessage `json:"ir"`
	Canvas      json.RawMessage `json:"canvas"`
}

// Page is one page of agents, newest first; Next is the cursor of the following page.
type Page struct {
	Agents []Agent `json:"agents"`
	Next   string  `json:"next,omitempty"`
}

// CreateInput is the body of POST /agents.
type CreateInput struct {
	IR      json.RawMessage `json:"ir"`
	Name    *string         `json:"name"`
	Version *string         `json:"version"`
	Canvas  json.RawMessage `json:"canvas"`
}

// PublishInput is the body of POST /agents/{id}/versions.
type PublishInput struct {
	IR      json.RawMessage `json:"ir"`
	Version *string         `json:"version"`
	Canvas  json.RawMessage `json:"canvas"`
}

var versionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$`)

const maxNameLength = 200

// checkedIR is an IR that passed validation, in the compact form it is stored in.
type checkedIR struct {
	graph   *graph.Graph
	compact []byte
	hash    string
}

// CheckIR validates an IR document for publishing or running: every problem goes into the
// error's details as {"problems": [...]}.
func CheckIR(raw json.RawMessage) (*graph.Graph, string, error) {
	c, err := checkIR(raw)
	if err != nil {
		return nil, "", err
	}
	return c.graph, c.hash, nil
}

func checkIR(raw json.RawMessage) (*checkedIR, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, ErrInvalidIR.Msg("ir is required").WithDetails(problemDetails(graph.Problems{{Path: "", Message: "ir is required"}}))
	}
	g, problems := graph.Validate(trimmed)
	if len(problems) > 0 {
		msg := "the IR has 1 problem: " + problems[0].Message
		if len(problems) > 1 {
			msg = fmt.Sprintf("the IR has %d problems; the first: %s", len(problems), problems[0].Message)
		}
		return nil, ErrInvalidIR.Msg("%s", msg).WithDetails(problemDetails(problems))
	}
	hash, err := graph.ContentHash(trimmed)
	if err != nil {
		return nil, ErrInvalidIR.Msg("the IR cannot be hashed: %v", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, ErrInvalidIR.Msg("the IR is not valid JSON")
	}
	return &checkedIR{graph: g, compact: buf.Bytes(), hash: hash}, nil
}

func problemDetails(ps graph.Problems) map[string]any {
	if ps == nil {
		ps = graph.Problems{}
	}
	return map[string]any{"problems": ps}
}

func checkCanvas(raw json.RawMessage) (*string, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	if trimmed[0] != '{' {
		return nil, invalid("canvas", "must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, invalid("canvas", "is not valid JSON")
	}
	s := buf.String()
	return &s, nil
}

func checkVersion(v *string) error {
	if v != nil && !versionPattern.MatchString(*v) {
		return invalid("version", "must be 1-64 characters: letters, digits and _ . + - (starting with a letter or digit)")
	}
	return nil
}

// Create publishes a new agent with its first version (default "1").
func (s *Service) Create(ctx context.Context, in CreateInput) (*Agent, *Version, error) {
	if err := checkVersion(in.Version); err != nil {
		return nil, nil, err
	}
	if in.Name != nil && len(*in.Name) > maxNameLength {
		return nil, nil, invalid("name", "is longer than %d characters", maxNameLength)
	}
	canvas, err := checkCanvas(in.Canvas)
	if err != nil {
		return nil, nil, err
	}
	ir, err := checkIR(in.IR)
	if err != nil {
		return nil, nil, err
	}
	if ir.graph.ID == "" {
		return nil, nil, ErrInvalidIR.Msg("ir.id is required to publish: it is the agent id").
			WithDetails(problemDetails(graph.Problems{{Path: "/id", Message: "ir.id is required to publish"}}))
	}
	name := ir.graph.Name
	if in.Name != nil {
		name = *in.Name
	}
	version := "1"
	if in.Version != nil {
		version = *in.Version
	}
	now := time.Now().UTC()
	a := agentRow{ID: ir.graph.ID, Name: name, IOCapture: DefaultCapture, RedactRules: "[]", CreatedAt: now, UpdatedAt: now}
	v := versionRow{AgentID: a.ID, Version: version, Seq: 1, ContentHash: ir.hash, IR: string(ir.compact), Canvas: canvas, CreatedAt: now}
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&a).Error; err != nil {
			return err
		}
		return tx.Create(&v).Error
	})
	if database.IsDuplicate(err) {
		return nil, nil, ErrAgentExists.Msg("agent %q already exists; publish a new version with POST /agents/%s/versions", a.ID, a.ID).
			WithDetails(map[string]any{"id": a.ID})
	}
	if err != nil {
		return nil, nil, err
	}
	sum := summary(v)
	return &Agent{ID: a.ID, Name: a.Name, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, Latest: &sum, Versions: []VersionSummary{sum}}, versionOf(v), nil
}

// Publish adds a version to an existing agent. created is false when the same version with the
// same content already existed (an idempotent repeat).
func (s *Service) Publish(ctx context.Context, agentID string, in PublishInput) (v *Version, created bool, err error) {
	if err := checkVersion(in.Version); err != nil {
		return nil, false, err
	}
	canvas, err := checkCanvas(in.Canvas)
	if err != nil {
		return nil, false, err
	}
	if _, err := s.agent(ctx, s.db.DB, agentID); err != nil {
		return nil, false, err
	}
	ir, err := checkIR(in.IR)
	if err != nil {
		return nil, false, err
	}
	if ir.graph.ID != agentID {
		msg := fmt.Sprintf("ir.id %q differs from the agent id %q", ir.graph.ID, agentID)
		if ir.graph.ID == "" {
			msg = fmt.Sprintf("ir.id is required and must be the agent id %q", agentID)
		}
		return nil, false, ErrInvalidIR.Msg("%s", msg).WithDetails(problemDetails(graph.Problems{{Path: "/id", Message: msg}}))
	}
	// A concurrent publish can take the seq or the version between our read and insert; the
	// unique keys catch it and we decide again on fresh data.
	for attempt := 0; attempt < 5; attempt++ {
		v, created, err = s.publishOnce(ctx, agentID, in.Version, ir, canvas)
		if err == nil || !database.IsDuplicate(err) {
			return v, created, err
		}
	}
	return nil, false, apperr.ErrUnavailable.Msg("too many concurrent publishes of agent %q; retry", agentID)
}

func (s *Service) publishOnce(ctx context.Context, agentID string, version *string, ir *checkedIR, canvas *string) (*Version, bool, error) {
	var out versionRow
	created := false
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		var rows []versionRow
		if err := tx.Select("version", "seq", "content_hash").Where("agent_id = ?", agentID).Find(&rows).Error; err != nil {
			return err
		}
		maxSeq, maxInt := 0, 0
		for _, r := range rows {
			maxSeq = max(maxSeq, r.Seq)
			if n, err := strconv.Atoi(r.Version); err == nil && n > maxInt && strconv.Itoa(n) == r.Version {
				maxInt = n
			}
		}
		name := strconv.Itoa(maxInt + 1)
		if version != nil {
			name = *version
			for _, r := range rows {
				if r.Version != name {
					continue
				}
				if r.ContentHash != ir.hash {
					return ErrVersionConflict.Msg("version %q of agent %q already exists with content %s; this IR hashes to %s", name, agentID, r.ContentHash, ir.hash).
						WithDetails(map[string]any{"version": name, "content_hash": r.ContentHash, "submitted_content_hash": ir.hash})
				}
				return tx.Where("agent_id = ? AND version = ?", agentID, name).Take(&out).Error
			}
		}
		now := time.Now().UTC()
		out = versionRow{AgentID: agentID, Version: name, Seq: maxSeq + 1, ContentHash: ir.hash, IR: string(ir.compact), Canvas: canvas, CreatedAt: now}
		if err := tx.Create(&out).Error; err != nil {
			return err
		}
		created = true
		return tx.Model(&agentRow{}).Where("id = ?", agentID).Update("updated_at", now).Error
	})
	if err != nil {
		return nil, false, err
	}
	return versionOf(out), created, nil
}

// List returns agents newest first.
func (s *Service) List(ctx context.Context, limit int, before string) (Page, error) {
	q, err := database.Keyset(s.db.WithContext(ctx), "created_at", limit, before)
	if err != nil {
		return Page{}, invalid("before", "is not a cursor from a previous page")
	}
	var rows []agentRow
	if err := q.Find(&rows).Error; err != nil {
		return Page{}, err
	}
	p := Page{}
	rows, p.Next = database.NextPage(rows, limit, func(r agentRow) database.Cursor { return database.Cursor{At: r.CreatedAt, ID: r.ID} })
	p.Agents = make([]Agent, 0, len(rows))
	if len(rows) == 0 {
		return p, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	// The latest version of each listed agent, in one query.
	var latest []versionRow
	err = s.db.WithContext(ctx).Select("agent_id", "version", "seq", "content_hash", "created_at").
		Where("agent_id IN ? AND seq = (SELECT MAX(v2.seq) FROM agent_versions v2 WHERE v2.agent_id = agent_versions.agent_id)", ids).
		Find(&latest).Error
	if err != nil {
		return Page{}, err
	}
	byAgent := map[string]VersionSummary{}
	for _, v := range latest {
		byAgent[v.AgentID] = summary(v)
	}
	for _, r := range rows {
		a := Agent{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
		if l, ok := byAgent[r.ID]; ok {
			a.Latest = &l
		}
		p.Agents = append(p.Agents, a)
	}
	return p, nil
}

// Get returns the agent with every version (newest first) and its I/O policy.
func (s *Service) Get(ctx context.Context, id string) (*Agent, error) {
	r, err := s.agent(ctx, s.db.DB, id)
	if err != nil {
		return nil, err
	}
	var rows []versionRow
	if err := s.db.WithContext(ctx).Select("agent_id", "version", "seq", "content_hash", "created_at").
		Where("agent_id = ?", id).Order("seq DESC").Find(&rows).Error; err != nil {
		return nil, err
	}
	a := &Agent{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Versions: make([]VersionSummary, 0, len(rows))}
	for _, v := range rows {
		a.Versions = append(a.Versions, summary(v))
	}
	if len(a.Versions) > 0 {
		l := a.Versions[0]
		a.Latest = &l
	}
	pol, err := policyOf(*r)
	if err != nil {
		return nil, err
	}
	a.IOPolicy = &pol
	return a, nil
}

// GetVersion returns one version with its IR and canvas.
func (s *Service) GetVersion(ctx context.Context, id, version string) (*Version, error) {
	if _, err := s.agent(ctx, s.db.DB, id); err != nil {
		return nil, err
	}
	var v versionRow
	err := s.db.WithContext(ctx).Where("agent_id = ? AND version = ?", id, version).Take(&v).Error
	if database.IsNotFound(err) {
		return nil, ErrVersionNotFound.Msg("agent %q has no version %q", id, version).WithDetails(map[string]any{"id": id, "version": version})
	}
	if err != nil {
		return nil, err
	}
	return versionOf(v), nil
}

// Resolve returns the version a run pins: by version, by content hash, or the latest when both
// are empty. It is the lookup the runs and triggers modules use.
func (s *Service) Resolve(ctx context.Context, id, version, contentHash string) (*Version, error) {
	if _, err := s.agent(ctx, s.db.DB, id); err != nil {
		return nil, err
	}
	q := s.db.WithContext(ctx).Where("agent_id = ?", id)
	switch {
	case version != "" && contentHash != "":
		return nil, apperr.Invalid("pin either version or content_hash, not both")
	case version != "":
		q = q.Where("version = ?", version)
	case contentHash != "":
		q = q.Where("content_hash = ?", contentHash).Order("seq DESC")
	default:
		q = q.Order("seq DESC")
	}
	var v versionRow
	err := q.Take(&v).Error
	if database.IsNotFound(err) {
		return nil, ErrVersionNotFound.Msg("agent %q has no matching version", id).WithDetails(map[string]any{"id": id, "version": version, "content_hash": contentHash})
	}
	if err != nil {
		return nil, err
	}
	return versionOf(v), nil
}

// GetPolicy returns the agent's I/O policy (the default when never set).
func (s *Service) GetPolicy(ctx context.Context, id string) (IOPolicy, error) {
	r, err := s.agent(ctx, s.db.DB, id)
	if err != nil {
		return IOPolicy{}, err
	}
	return policyOf(*r)
}

// SetPolicy replaces the agent's I/O policy. It touches no version, so no content hash moves.
func (s *Service) SetPolicy(ctx context.Context, id string, p IOPolicy) (IOPolicy, error) {
	if err := p.Validate(); err != nil {
		return IOPolicy{}, err
	}
	p = p.normalized()
	rules, err := json.Marshal(p.RedactRules)
	if err != nil {
		return IOPolicy{}, err
	}
	res := s.db.WithContext(ctx).Model(&agentRow{}).Where("id = ?", id).Updates(map[string]any{
		"io_capture":           p.IOCapture,
		"io_retention_seconds": p.IORetentionSeconds,
		"redact_rules":         string(rules),
		"updated_at":           time.Now().UTC(),
	})
	if res.Error != nil {
		return IOPolicy{}, res.Error
	}
	if res.RowsAffected == 0 {
		return IOPolicy{}, notFound(id)
	}
	return p, nil
}

func (s *Service) agent(ctx context.Context, tx *gorm.DB, id string) (*agentRow, error) {
	var r agentRow
	err := tx.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if database.IsNotFound(err) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func notFound(id string) error {
	return ErrAgentNotFound.Msg("agent %q not found", id).WithDetails(map[string]any{"id": id})
}

func policyOf(r agentRow) (IOPolicy, error) {
	p := IOPolicy{IOCapture: r.IOCapture, IORetentionSeconds: r.IORetentionSeconds}
	if err := json.Unmarshal([]byte(r.RedactRules), &p.RedactRules); err != nil {
		return IOPolicy{}, fmt.Errorf("agent %q: stored redact rules: %w", r.ID, err)
	}
	return p.normalized(), nil
}

func summary(v versionRow) VersionSummary {
	return VersionSummary{Version: v.Version, ContentHash: v.ContentHash, CreatedAt: v.CreatedAt}
}

func versionOf(v versionRow) *Version {
	out := &Version{AgentID: v.AgentID, Version: v.Version, ContentHash: v.ContentHash, CreatedAt: v.CreatedAt, IR: json.RawMessage(v.IR)}
	if v.Canvas != nil {
		out.Canvas = json.RawMessage(*v.Canvas)
	} else {
		out.Canvas = json.RawMessage("null")
	}
	return out
}

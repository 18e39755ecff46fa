package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
)

type resultRow struct {
	ID        string `gorm:"primaryKey"`
	LogicalID *string
	AgentID   *string
	SuiteID   *string
	CaseID    *string
	Preset    *string
	Params    *string
	Metrics   string
	Labels    *string
	Notes     string
	CreatedAt time.Time
}

func (resultRow) TableName() string { return "bench_results" }

// RecordInput is the body of POST /bench/runs.
type RecordInput struct {
	LogicalID *string             `json:"logical_id"`
	AgentID   *string             `json:"agent_id"`
	SuiteID   *string             `json:"suite_id"`
	CaseID    *string             `json:"case_id"`
	Preset    *string             `json:"preset"`
	Params    json.RawMessage     `json:"params"`
	Metrics   map[string]*float64 `json:"metrics"`
	Labels    map[string]*string  `json:"labels"`
	Notes     *string             `json:"notes"`
}

// Result is one recorded benchmark or eval result.
type Result struct {
	ID        string             `json:"id"`
	LogicalID *string            `json:"logical_id"`
	AgentID   *string            `json:"agent_id"`
	SuiteID   *string            `json:"suite_id"`
	CaseID    *string            `json:"case_id"`
	Preset    *string            `json:"preset"`
	Params    json.RawMessage    `json:"params"`
	Metrics   map[string]float64 `json:"metrics"`
	Labels    map[string]string  `json:"labels"`
	Notes     string             `json:"notes"`
	CreatedAt time.Time          `json:"created_at"`
}

// ResultPage is one page of results, newest first; Next is the cursor of the following page.
type ResultPage struct {
	Results []Result `json:"results"`
	Next    string   `json:"next,omitempty"`
}

// ResultFilter narrows a listing; empty fields do not filter.
type ResultFilter struct {
	LogicalID string
	AgentID   string
	SuiteID   string
	CaseID    string
}

// MetricDelta compares one metric of two results; a side without the metric is null, and so
// are delta and delta_pct then. delta_pct is null when a is 0 (no relative change exists).
type MetricDelta struct {
	Name     string   `json:"name"`
	A        *float64 `json:"a"`
	B        *float64 `json:"b"`
	Delta    *float64 `json:"delta"`
	DeltaPct *float64 `json:"delta_pct"`
}

// Comparison is the answer of GET /bench/compare: b measured against the baseline a.
type Comparison struct {
	A       *Result       `json:"a"`
	B       *Result       `json:"b"`
	Metrics []MetricDelta `json:"metrics"`
}

// optionalRef validates an optional reference field: absent is fine, present must be
// non-empty text without control characters or surrounding spaces.
func optionalRef(field string, v *string, max int) error {
	if v == nil {
		return nil
	}
	if *v == "" {
		return invalid(field, "must not be empty (omit it or send null instead)")
	}
	if !plainText(*v, max) || strings.TrimSpace(*v) != *v {
		return invalid(field, "must be at most %d characters, without control characters or surrounding spaces", max)
	}
	return nil
}

func optionalIdent(field string, v *string) error {
	if v == nil {
		return nil
	}
	if !identPattern.MatchString(*v) {
		return invalid(field, "must be 1-128 characters: letters, digits and _ . - (starting with a letter or digit)")
	}
	return nil
}

// checkRecord validates a RecordInput and returns the row to store (without id and time).
func checkRecord(in RecordInput) (resultRow, error) {
	var row resultRow
	if err := optionalRef("logical_id", in.LogicalID, maxRefLength); err != nil {
		return row, err
	}
	if err := optionalRef("agent_id", in.AgentID, maxRefLength); err != nil {
		return row, err
	}
	if in.LogicalID == nil && in.AgentID == nil {
		return row, invalid("logical_id", "or agent_id is required: say which model or agent was measured")
	}
	if err := optionalIdent("suite_id", in.SuiteID); err != nil {
		return row, err
	}
	if err := optionalIdent("case_id", in.CaseID); err != nil {
		return row, err
	}
	if in.CaseID != nil && in.SuiteID == nil {
		return row, invalid("case_id", "needs suite_id: a case is named within its suite")
	}
	if err := optionalIdent("preset", in.Preset); err != nil {
		return row, err
	}
	if !isNull(in.Params) {
		p, err := compactObject("params", in.Params)
		if err != nil {
			return row, err
		}
		row.Params = &p
	}
	metrics, err := checkMetrics(in.Metrics)
	if err != nil {
		return row, err
	}
	mj, err := json.Marshal(metrics)
	if err != nil {
		return row, err
	}
	row.Metrics = string(mj)
	if len(in.Labels) > maxLabels {
		return row, invalid("labels", "has %d entries; at most %d are allowed", len(in.Labels), maxLabels)
	}
	if len(in.Labels) > 0 {
		labels := make(map[string]string, len(in.Labels))
		for k, v := range in.Labels {
			if !labelKeyPattern.MatchString(k) {
				return row, invalid("labels", "key %q must be 1-64 characters: letters, digits and _ . / - (starting with a letter or digit)", truncate(k))
			}
			if v == nil {
				return row, invalid("labels", "value of %q must be a string, not null", k)
			}
			if !plainText(*v, maxLabelValueLength) {
				return row, invalid("labels", "value of %q must be at most %d characters without control characters", k, maxLabelValueLength)
			}
			labels[k] = *v
		}
		lj, err := json.Marshal(labels)
		if err != nil {
			return row, err
		}
		s := string(lj)
		row.Labels = &s
	}
	if in.Notes != nil {
		if !multilineText(*in.Notes, maxNotesLength) {
			return row, invalid("notes", "must be at most %d characters without control characters other than tab and newline", maxNotesLength)
		}
		row.Notes = *in.Notes
	}
	row.LogicalID, row.AgentID, row.SuiteID, row.CaseID, row.Preset = in.LogicalID, in.AgentID, in.SuiteID, in.CaseID, in.Preset
	return row, nil
}

func checkMetrics(in map[string]*float64) (map[string]float64, error) {
	if len(in) == 0 {
		return nil, invalid("metrics", "is required: an object of at least one metric name to a number")
	}
	if len(in) > maxMetrics {
		return nil, invalid("metrics", "has %d entries; at most %d are allowed", len(in), maxMetrics)
	}
	out := make(map[string]float64, len(in))
	for name, v := range in {
		if name == "" || strings.TrimSpace(name) != name || !plainText(name, maxMetricNameLength) {
			return nil, invalid("metrics", "name %q must be 1-%d characters without control characters or surrounding spaces", truncate(name), maxMetricNameLength)
		}
		if v == nil {
			return nil, invalid("metrics", "value of %q must be a number, not null", name)
		}
		// JSON cannot spell NaN or infinities and 1e999 fails to decode, so this is a guard
		// for callers of the service that are not the HTTP handler.
		if math.IsNaN(*v) || math.IsInf(*v, 0) {
			return nil, invalid("metrics", "value of %q must be a finite number", name)
		}
		out[name] = *v
	}
	return out, nil
}

func truncate(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "…"
}

// Record validates and stores a result. A suite_id must name a stored suite and a case_id a
// case of it; logical_id, agent_id and preset are labels and are not looked up.
func (s *Service) Record(ctx context.Context, in RecordInput) (*Result, error) {
	row, err := checkRecord(in)
	if err != nil {
		return nil, err
	}
	if row.SuiteID != nil {
		if err := s.checkSuiteRef(ctx, *row.SuiteID, row.CaseID); err != nil {
			return nil, err
		}
	}
	row.ID = newID(resultIDPrefix)
	row.CreatedAt = now()
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return nil, err
	}
	return resultOf(row)
}

func (s *Service) checkSuiteRef(ctx context.Context, suiteID string, caseID *string) error {
	var n int64
	if err := s.db.WithContext(ctx).Model(&suiteRow{}).Where("id = ?", suiteID).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return ErrSuiteNotFound.Msg("suite %q not found; store it with POST /bench/suites first", suiteID).
			WithDetails(map[string]any{"field": "suite_id", "suite_id": suiteID})
	}
	if caseID == nil {
		return nil
	}
	if err := s.db.WithContext(ctx).Model(&caseRow{}).Where("suite_id = ? AND case_id = ?", suiteID, *caseID).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return ErrCaseNotFound.Msg("suite %q has no case %q", suiteID, *caseID).
			WithDetails(map[string]any{"field": "case_id", "suite_id": suiteID, "case_id": *caseID})
	}
	return nil
}

// GetResult returns one result.
func (s *Service) GetResult(ctx context.Context, id string) (*Result, error) {
	notFound := ErrResultNotFound.Msg("bench result %q not found", truncate(id)).WithDetails(map[string]any{"id": truncate(id)})
	if !resultIDPattern.MatchString(id) {
		return nil, notFound
	}
	var row resultRow
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	if database.IsNotFound(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	return resultOf(row)
}

// ListResults returns results newest first, narrowed by f.
func (s *Service) ListResults(ctx context.Context, f ResultFilter, limit int, before string) (ResultPage, error) {
	cur, err := decodeCursor(before)
	if err != nil {
		return ResultPage{}, err
	}
	q := s.db.WithContext(ctx).Order("created_at DESC, id DESC").Limit(limit + 1)
	for _, c := range []struct{ col, v string }{
		{"logical_id", f.LogicalID}, {"agent_id", f.AgentID}, {"suite_id", f.SuiteID}, {"case_id", f.CaseID},
	} {
		if c.v == "" {
			continue
		}
		if !plainText(c.v, 256) {
			return ResultPage{}, invalid(c.col, "must be at most 256 characters without control characters")
		}
		q = q.Where(c.col+" = ?", c.v)
	}
	if cur != nil {
		q = q.Where("created_at < ? OR (created_at = ? AND id < ?)", cur.At, cur.At, cur.ID)
	}
	var rows []resultRow
	if err := q.Find(&rows).Error; err != nil {
		return ResultPage{}, err
	}
	p := ResultPage{Results: make([]Result, 0, len(rows))}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[len(rows)-1]
		p.Next = database.Cursor{At: last.CreatedAt, ID: last.ID}.Encode()
	}
	for _, r := range rows {
		res, err := resultOf(r)
		if err != nil {
			return ResultPage{}, err
		}
		p.Results = append(p.Results, *res)
	}
	return p, nil
}

// Compare sets result b against the baseline a, metric by metric, over the union of their
// metric names (sorted by name).
func (s *Service) Compare(ctx context.Context, aID, bID string) (*Comparison, error) {
	if aID == "" || bID == "" {
		missing := "a"
		if aID != "" {
			missing = "b"
		}
		return nil, apperr.Invalid("query parameters a and b are required: the ids of two recorded results").
			WithDetails(map[string]any{"field": missing})
	}
	a, err := s.GetResult(ctx, aID)
	if err != nil {
		return nil, withSide(err, "a")
	}
	b, err := s.GetResult(ctx, bID)
	if err != nil {
		return nil, withSide(err, "b")
	}
	return &Comparison{A: a, B: b, Metrics: compareMetrics(a.Metrics, b.Metrics)}, nil
}

func withSide(err error, side string) error {
	if ae := apperr.From(err); ae != nil && ae.Code == ErrResultNotFound.Code {
		d, _ := ae.Details.(map[string]any)
		return ae.Msg("%s (query parameter %s)", ae.Message, side).WithDetails(map[string]any{"field": side, "id": d["id"]})
	}
	return err
}

// compareMetrics is the pure part of Compare.
func compareMetrics(a, b map[string]float64) []MetricDelta {
	names := make([]string, 0, len(a)+len(b))
	for n := range a {
		names = append(names, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]MetricDelta, 0, len(names))
	for _, n := range names {
		d := MetricDelta{Name: n}
		av, aok := a[n]
		bv, bok := b[n]
		if aok {
			d.A = &av
		}
		if bok {
			d.B = &bv
		}
		if aok && bok {
			// Extreme values can overflow; an infinite delta is reported as null rather than
			// failing the whole answer (JSON has no infinity).
			d.Delta = finite(bv - av)
			if av != 0 {
				d.DeltaPct = finite((bv - av) / math.Abs(av) * 100)
			}
		}
		out = append(out, d)
	}
	return out
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func resultOf(r resultRow) (*Result, error) {
	out := &Result{ID: r.ID, LogicalID: r.LogicalID, AgentID: r.AgentID, SuiteID: r.SuiteID, CaseID: r.CaseID,
		Preset: r.Preset, Notes: r.Notes, CreatedAt: r.CreatedAt, Params: json.RawMessage("null"), Labels: map[string]string{}}
	if r.Params != nil {
		out.Params = json.RawMessage(*r.Params)
	}
	if err := json.Unmarshal([]byte(r.Metrics), &out.Metrics); err != nil {
		return nil, fmt.Errorf("bench result %s: stored metrics: %w", r.ID, err)
	}
	if r.Labels != nil {
		if err := json.Unmarshal([]byte(*r.Labels), &out.Labels); err != nil {
			return nil, fmt.Errorf("bench result %s: stored labels: %w", r.ID, err)
		}
	}
	return out, nil
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/svc-dev/svc/platform/database"
	"gorm.io/gorm"
)

type suiteRow struct {
	ID          string `gorm:"primaryKey"`
	Name        string
	Description string
	CaseCount   int
	CreatedAt   time.Time
}

func (suiteRow) TableName() string { return "bench_suites" }

type caseRow struct {
	SuiteID  string `gorm:"primaryKey"`
	CaseID   string `gorm:"primaryKey"`
	Seq      int
	Input    string
	Expected *string
	Tags     string
}

func (caseRow) TableName() string { return "bench_cases" }

// SuiteInput is the body of POST /bench/suites.
type SuiteInput struct {
	ID          *string     `json:"id"`
	Name        *string     `json:"name"`
	Description *string     `json:"description"`
	Cases       []CaseInput `json:"cases"`
}

// CaseInput is one golden case of a SuiteInput.
type CaseInput struct {
	ID       *string         `json:"id"`
	Input    json.RawMessage `json:"input"`
	Expected json.RawMessage `json:"expected"`
	Tags     []*string       `json:"tags"`
}

// Suite is a stored golden-case suite. Cases is filled on the detail only.
type Suite struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CaseCount   int       `json:"case_count"`
	CreatedAt   time.Time `json:"created_at"`
	Cases       []Case    `json:"cases,omitempty"`
}

// Case is one golden case: an input and, optionally, the expected output.
type Case struct {
	ID       string          `json:"id"`
	Input    json.RawMessage `json:"input"`
	Expected json.RawMessage `json:"expected,omitempty"`
	Tags     []string        `json:"tags"`
}

// SuitePage is one page of suites (without cases), newest first.
type SuitePage struct {
	Suites []Suite `json:"suites"`
	Next   string  `json:"next,omitempty"`
}

// caseBatch bounds the rows of one INSERT: 500 rows × 6 columns stays far below the bind
// variable limits of both dialects.
const caseBatch = 500

// checkSuite validates a SuiteInput and returns the rows to store.
func checkSuite(in SuiteInput) (suiteRow, []caseRow, error) {
	var s suiteRow
	if in.ID != nil {
		if !identPattern.MatchString(*in.ID) {
			return s, nil, invalid("id", "must be 1-128 characters: letters, digits and _ . - (starting with a letter or digit)")
		}
		s.ID = *in.ID
	}
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
		return s, nil, invalid("name", "is required")
	}
	if !plainText(*in.Name, maxNameLength) {
		return s, nil, invalid("name", "must be at most %d characters without control characters", maxNameLength)
	}
	s.Name = *in.Name
	if in.Description != nil {
		if !multilineText(*in.Description, maxDescriptionLength) {
			return s, nil, invalid("description", "must be at most %d characters without control characters other than tab and newline", maxDescriptionLength)
		}
		s.Description = *in.Description
	}
	if len(in.Cases) == 0 {
		return s, nil, invalid("cases", "is required: a list of 1 to %d cases", maxCases)
	}
	if len(in.Cases) > maxCases {
		return s, nil, invalid("cases", "has %d cases; at most %d are allowed", len(in.Cases), maxCases)
	}
	cases := make([]caseRow, 0, len(in.Cases))
	seen := make(map[string]int, len(in.Cases))
	for i, c := range in.Cases {
		field := fmt.Sprintf("cases[%d]", i)
		if c.ID == nil {
			return s, nil, invalid(field+".id", "is required")
		}
		if !identPattern.MatchString(*c.ID) {
			return s, nil, invalid(field+".id", "must be 1-128 characters: letters, digits and _ . - (starting with a letter or digit)")
		}
		if j, dup := seen[*c.ID]; dup {
			return s, nil, ErrDuplicateCaseID.Msg("case id %q appears at cases[%d] and cases[%d]", *c.ID, j, i).
				WithDetails(map[string]any{"field": field + ".id", "id": *c.ID, "indexes": []int{j, i}})
		}
		seen[*c.ID] = i
		if isNull(c.Input) {
			return s, nil, invalid(field+".input", "is required (any JSON value but null)")
		}
		input, err := compactJSON(field+".input", c.Input)
		if err != nil {
			return s, nil, err
		}
		row := caseRow{CaseID: *c.ID, Seq: i, Input: input}
		if !isNull(c.Expected) {
			exp, err := compactJSON(field+".expected", c.Expected)
			if err != nil {
				return s, nil, err
			}
			row.Expected = &exp
		}
		if len(c.Tags) > maxTags {
			return s, nil, invalid(field+".tags", "has %d tags; at most %d are allowed", len(c.Tags), maxTags)
		}
		tags := make([]string, 0, len(c.Tags))
		for _, t := range c.Tags {
			if t == nil || *t == "" || !plainText(*t, maxTagLength) {
				return s, nil, invalid(field+".tags", "must be strings of 1-%d characters without control characters", maxTagLength)
			}
			tags = append(tags, *t)
		}
		tj, err := json.Marshal(tags)
		if err != nil {
			return s, nil, err
		}
		row.Tags = string(tj)
		cases = append(cases, row)
	}
	s.CaseCount = len(cases)
	return s, cases, nil
}

// CreateSuite validates and stores a suite with its cases, all or nothing. Suites are
// immutable: results point at their cases.
func (s *Service) CreateSuite(ctx context.Context, in SuiteInput) (*Suite, error) {
	row, cases, err := checkSuite(in)
	if err != nil {
		return nil, err
	}
	if row.ID == "" {
		row.ID = newID(suiteIDPrefix)
	}
	row.CreatedAt = now()
	for i := range cases {
		cases[i].SuiteID = row.ID
	}
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		return tx.CreateInBatches(cases, caseBatch).Error
	})
	if database.IsDuplicate(err) {
		return nil, ErrSuiteExists.Msg("suite %q already exists; suites are immutable, store a new one under another id", row.ID).
			WithDetails(map[string]any{"id": row.ID})
	}
	if err != nil {
		return nil, err
	}
	out := suiteOf(row)
	return &out, nil
}

// GetSuite returns a suite with its cases in submitted order.
func (s *Service) GetSuite(ctx context.Context, id string) (*Suite, error) {
	if !identPattern.MatchString(id) {
		return nil, suiteNotFound(id)
	}
	var row suiteRow
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	if database.IsNotFound(err) {
		return nil, suiteNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	var rows []caseRow
	if err := s.db.WithContext(ctx).Where("suite_id = ?", id).Order("seq").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := suiteOf(row)
	out.Cases = make([]Case, 0, len(rows))
	for _, r := range rows {
		c := Case{ID: r.CaseID, Input: json.RawMessage(r.Input)}
		if r.Expected != nil {
			c.Expected = json.RawMessage(*r.Expected)
		}
		if err := json.Unmarshal([]byte(r.Tags), &c.Tags); err != nil {
			return nil, fmt.Errorf("bench suite %s case %s: stored tags: %w", id, r.CaseID, err)
		}
		out.Cases = append(out.Cases, c)
	}
	return &out, nil
}

// ListSuites returns suites newest first, with case counts and without cases.
func (s *Service) ListSuites(ctx context.Context, limit int, before string) (SuitePage, error) {
	cur, err := decodeCursor(before)
	if err != nil {
		return SuitePage{}, err
	}
	q := s.db.WithContext(ctx).Order("created_at DESC, id DESC").Limit(limit + 1)
	if cur != nil {
		q = q.Where("created_at < ? OR (created_at = ? AND id < ?)", cur.At, cur.At, cur.ID)
	}
	var rows []suiteRow
	if err := q.Find(&rows).Error; err != nil {
		return SuitePage{}, err
	}
	p := SuitePage{Suites: make([]Suite, 0, len(rows))}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[len(rows)-1]
		p.Next = database.Cursor{At: last.CreatedAt, ID: last.ID}.Encode()
	}
	for _, r := range rows {
		p.Suites = append(p.Suites, suiteOf(r))
	}
	return p, nil
}

func suiteNotFound(id string) error {
	return ErrSuiteNotFound.Msg("suite %q not found", truncate(id)).WithDetails(map[string]any{"id": truncate(id)})
}

func suiteOf(r suiteRow) Suite {
	return Suite{ID: r.ID, Name: r.Name, Description: r.Description, CaseCount: r.CaseCount, CreatedAt: r.CreatedAt}
}

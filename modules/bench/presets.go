package bench

import (
	"context"
	"encoding/json"
	"time"

	"github.com/svc-dev/svc/platform/database"
)

type presetRow struct {
	Name        string `gorm:"primaryKey"`
	Description string
	Params      string
	CreatedAt   time.Time
}

func (presetRow) TableName() string { return "bench_presets" }

// PresetInput is the body of POST /bench/presets.
type PresetInput struct {
	Name        *string         `json:"name"`
	Params      json.RawMessage `json:"params"`
	Description *string         `json:"description"`
}

// Preset is a named set of parameters (for example sampling settings) to reuse across runs.
type Preset struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Params      json.RawMessage `json:"params"`
	CreatedAt   time.Time       `json:"created_at"`
}

// PresetPage is one page of presets, newest first.
type PresetPage struct {
	Presets []Preset `json:"presets"`
	Next    string   `json:"next,omitempty"`
}

// CreatePreset stores a new preset; a name in use is 409 preset_exists (presets are not
// overwritten in place: delete and create again to change one).
func (s *Service) CreatePreset(ctx context.Context, in PresetInput) (*Preset, error) {
	if in.Name == nil {
		return nil, invalid("name", "is required")
	}
	if !identPattern.MatchString(*in.Name) {
		return nil, invalid("name", "must be 1-128 characters: letters, digits and _ . - (starting with a letter or digit)")
	}
	if isNull(in.Params) {
		return nil, invalid("params", "is required: a JSON object")
	}
	params, err := compactObject("params", in.Params)
	if err != nil {
		return nil, err
	}
	row := presetRow{Name: *in.Name, Params: params, CreatedAt: now()}
	if in.Description != nil {
		if !multilineText(*in.Description, maxDescriptionLength) {
			return nil, invalid("description", "must be at most %d characters without control characters other than tab and newline", maxDescriptionLength)
		}
		row.Description = *in.Description
	}
	err = s.db.WithContext(ctx).Create(&row).Error
	if database.IsDuplicate(err) {
		return nil, ErrPresetExists.Msg("preset %q already exists; delete it first to replace it", row.Name).
			WithDetails(map[string]any{"name": row.Name})
	}
	if err != nil {
		return nil, err
	}
	p := presetOf(row)
	return &p, nil
}

// GetPreset returns one preset.
func (s *Service) GetPreset(ctx context.Context, name string) (*Preset, error) {
	if !identPattern.MatchString(name) {
		return nil, presetNotFound(name)
	}
	var row presetRow
	err := s.db.WithContext(ctx).Where("name = ?", name).Take(&row).Error
	if database.IsNotFound(err) {
		return nil, presetNotFound(name)
	}
	if err != nil {
		return nil, err
	}
	p := presetOf(row)
	return &p, nil
}

// DeletePreset removes a preset. Results that named it keep the name and their own params.
func (s *Service) DeletePreset(ctx context.Context, name string) error {
	if !identPattern.MatchString(name) {
		return presetNotFound(name)
	}
	res := s.db.WithContext(ctx).Where("name = ?", name).Delete(&presetRow{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return presetNotFound(name)
	}
	return nil
}

// ListPresets returns presets newest first.
func (s *Service) ListPresets(ctx context.Context, limit int, before string) (PresetPage, error) {
	cur, err := decodeCursor(before)
	if err != nil {
		return PresetPage{}, err
	}
	q := s.db.WithContext(ctx).Order("created_at DESC, name DESC").Limit(limit + 1)
	if cur != nil {
		q = q.Where("created_at < ? OR (created_at = ? AND name < ?)", cur.At, cur.At, cur.ID)
	}
	var rows []presetRow
	if err := q.Find(&rows).Error; err != nil {
		return PresetPage{}, err
	}
	p := PresetPage{Presets: make([]Preset, 0, len(rows))}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[len(rows)-1]
		p.Next = database.Cursor{At: last.CreatedAt, ID: last.Name}.Encode()
	}
	for _, r := range rows {
		p.Presets = append(p.Presets, presetOf(r))
	}
	return p, nil
}

func presetNotFound(name string) error {
	return ErrPresetNotFound.Msg("preset %q not found", truncate(name)).WithDetails(map[string]any{"name": truncate(name)})
}

func presetOf(r presetRow) Preset {
	return Preset{Name: r.Name, Description: r.Description, Params: json.RawMessage(r.Params), CreatedAt: r.CreatedAt}
}

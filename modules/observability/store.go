package observability

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/svc-dev/svc/platform/database"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// store is the trace tables' repository.
type store struct {
	db *database.DB
}

type traceRunRow struct {
	RunID              string `gorm:"primaryKey"`
	TraceID            string
	AgentID            string
	IOCapture          string `gorm:"column:io_capture"`
	IORetentionSeconds *int64 `gorm:"column:io_retention_seconds"`
	CreatedAt          time.Time
}

func (traceRunRow) TableName() string { return "trace_runs" }

type spanRow struct {
	RunID        string `gorm:"primaryKey"`
	SpanID       string `gorm:"primaryKey"`
	ParentID     string
	Name         string
	Kind         string
	NodeID       string
	NodeKind     string
	Status       string
	StartAt      time.Time
	EndAt        *time.Time
	DurationMS   *int64 `gorm:"column:duration_ms"`
	Attrs        string
	ErrorCode    string
	ErrorMessage string
}

func (spanRow) TableName() string { return "trace_spans" }

type ioRow struct {
	RunID      string `gorm:"primaryKey"`
	NodeID     string `gorm:"primaryKey"`
	Capture    string
	Input      *string
	Output     *string
	InputMeta  string
	OutputMeta string
	CapturedAt time.Time
	ExpiresAt  *time.Time
	PurgedAt   *time.Time
	// restored rows come from a checkpoint replay: they never replace a captured row.
	restored bool `gorm:"-"`
}

func (ioRow) TableName() string { return "trace_node_io" }

// ioRow.Capture values beyond the policy levels.
const (
	captureTooLarge    = "too_large"   // payload over MaxIOBytes: metadata kept instead
	captureUnencodable = "unencodable" // payload not JSON-encodable: metadata kept instead
)

// rowsPerInsert bounds each multi-row INSERT: far below SQLite's bound-variable limit, and
// small enough that the pure-Go driver's per-statement binding (which grows faster than the
// number of parameters) stays cheap.
const rowsPerInsert = 25

var spanUpdateColumns = []string{"parent_id", "name", "kind", "node_id", "node_kind", "status", "start_at", "end_at", "duration_ms", "attrs", "error_code", "error_message"}

func toRow(sp Span) spanRow {
	attrs, _ := json.Marshal(sp.Attributes) // plain strings and ints: cannot fail
	r := spanRow{RunID: sp.RunID, SpanID: sp.SpanID, ParentID: sp.ParentID, Name: sp.Name, Kind: sp.Kind, NodeID: sp.NodeID,
		NodeKind: sp.NodeKind, Status: sp.Status, StartAt: sp.Start.UTC(), DurationMS: sp.DurationMS, Attrs: string(attrs)}
	if sp.End != nil {
		e := sp.End.UTC()
		r.EndAt = &e
	}
	if sp.Error != nil {
		r.ErrorCode, r.ErrorMessage = sp.Error.Code, sp.Error.Message
	}
	return r
}

func fromRow(r spanRow) Span {
	sp := Span{RunID: r.RunID, SpanID: r.SpanID, ParentID: r.ParentID, Name: r.Name, Kind: r.Kind, NodeID: r.NodeID,
		NodeKind: r.NodeKind, Status: r.Status, Start: r.StartAt.UTC(), DurationMS: r.DurationMS}
	if r.EndAt != nil {
		e := r.EndAt.UTC()
		sp.End = &e
	}
	_ = json.Unmarshal([]byte(r.Attrs), &sp.Attributes) // written by toRow; a bad row shows no attributes
	if r.ErrorCode != "" || r.ErrorMessage != "" {
		sp.Error = &SpanError{Code: r.ErrorCode, Message: r.ErrorMessage}
	}
	return sp
}

// write persists one flush in a transaction: the trace_runs rows of runs written for the first
// time, the changed spans (upserts) and the captured I/O of every batch.
func (s *store) write(ctx context.Context, batches []*runBatch) error {
	var (
		runs             []traceRunRow
		fresh, restored  []spanRow
		freshIO, restIO  []ioRow
		seenIO, seenRest = map[[2]string]int{}, map[[2]string]int{}
	)
	now := time.Now().UTC()
	for _, b := range batches {
		if !b.lr.registered {
			p := *b.lr.policy
			runs = append(runs, traceRunRow{RunID: b.info.RunID, TraceID: TraceID(b.info.RunID), AgentID: b.info.AgentID,
				IOCapture: p.Capture, IORetentionSeconds: p.RetentionSeconds, CreatedAt: now})
		}
		for _, st := range b.spans {
			if st.restored {
				restored = append(restored, toRow(st.span))
			} else {
				fresh = append(fresh, toRow(st.span))
			}
		}
		// One row per node per statement: PostgreSQL refuses to update a row twice in one
		// INSERT, and a re-executed node may appear twice in a flush (the last one wins).
		for _, row := range b.rows {
			key := [2]string{row.RunID, row.NodeID}
			list, seen := &freshIO, seenIO
			if row.restored {
				list, seen = &restIO, seenRest
			}
			if i, ok := seen[key]; ok {
				(*list)[i] = row
				continue
			}
			seen[key] = len(*list)
			*list = append(*list, row)
		}
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// A resumed run keeps the policy it was first recorded under.
		for i := 0; i < len(runs); i += rowsPerInsert {
			chunk := runs[i:min(i+rowsPerInsert, len(runs))]
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&chunk).Error; err != nil {
				return err
			}
		}
		keys := []clause.Column{{Name: "run_id"}, {Name: "span_id"}}
		for _, chunk := range chunks(fresh) {
			if err := tx.Clauses(clause.OnConflict{Columns: keys, DoUpdates: clause.AssignmentColumns(spanUpdateColumns)}).Create(&chunk).Error; err != nil {
				return err
			}
		}
		// A replayed checkpoint only fills in what is missing or still open.
		for _, chunk := range chunks(restored) {
			err := tx.Clauses(clause.OnConflict{Columns: keys, DoUpdates: clause.AssignmentColumns(spanUpdateColumns),
				Where: clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "trace_spans.status IN (?, ?)", Vars: []any{StatusRunning, StatusWaiting}}}}}).
				Create(&chunk).Error
			if err != nil {
				return err
			}
		}
		ioKeys := []clause.Column{{Name: "run_id"}, {Name: "node_id"}}
		update := clause.OnConflict{Columns: ioKeys, DoUpdates: clause.AssignmentColumns(
			[]string{"capture", "input", "output", "input_meta", "output_meta", "captured_at", "expires_at", "purged_at"})}
		for i := 0; i < len(freshIO); i += rowsPerInsert {
			chunk := freshIO[i:min(i+rowsPerInsert, len(freshIO))]
			if err := tx.Clauses(update).Create(&chunk).Error; err != nil {
				return err
			}
		}
		for i := 0; i < len(restIO); i += rowsPerInsert {
			chunk := restIO[i:min(i+rowsPerInsert, len(restIO))]
			if err := tx.Clauses(clause.OnConflict{Columns: ioKeys, DoNothing: true}).Create(&chunk).Error; err != nil {
				return err
			}
		}
		return nil
	})
}

func chunks(rows []spanRow) [][]spanRow {
	var out [][]spanRow
	for i := 0; i < len(rows); i += rowsPerInsert {
		out = append(out, rows[i:min(i+rowsPerInsert, len(rows))])
	}
	return out
}

// traceRun returns the run's trace_runs row, or nil.
func (s *store) traceRun(ctx context.Context, runID string) (*traceRunRow, error) {
	var row traceRunRow
	err := s.db.WithContext(ctx).Where("run_id = ?", runID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &row, nil
}

// spans returns every span of a run.
func (s *store) spans(ctx context.Context, runID string) ([]Span, error) {
	var rows []spanRow
	if err := s.db.WithContext(ctx).Where("run_id = ?", runID).Order("start_at, span_id").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]Span, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// nodeSpan returns the span of a node (kind node or iteration), or nil.
func (s *store) nodeSpan(ctx context.Context, runID, nodeID string) (*Span, error) {
	var row spanRow
	err := s.db.WithContext(ctx).Where("run_id = ? AND span_id = ?", runID, SpanID(runID, nodeID)).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sp := fromRow(row)
	return &sp, nil
}

// nodeIO returns the captured I/O row of a node, or nil.
func (s *store) nodeIO(ctx context.Context, runID, nodeID string) (*ioRow, error) {
	var row ioRow
	err := s.db.WithContext(ctx).Where("run_id = ? AND node_id = ?", runID, nodeID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &row, nil
}

// purgeExpired drops the payloads whose retention ended at or before now and returns how many
// rows it purged. Metadata stays, so a read reports retention_expired rather than not_captured.
func (s *store) purgeExpired(ctx context.Context, now time.Time) (int64, error) {
	now = now.UTC()
	res := s.db.WithContext(ctx).Model(&ioRow{}).
		Where("expires_at IS NOT NULL AND expires_at <= ? AND purged_at IS NULL", now).
		Updates(map[string]any{"input": nil, "output": nil, "purged_at": now})
	return res.RowsAffected, res.Error
}

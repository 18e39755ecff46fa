package runs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/svc-dev/svc/modules/graph/runtime"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Named error codes of durable mode.
var (
	// ErrRunNotWaiting answers a resume of a run that is not parked at a human node (finished,
	// running, or already resumed by a concurrent request).
	ErrRunNotWaiting = apperr.Conflict("run_not_waiting", "the run is not waiting at a human node")
	// ErrLeaseLost stops a durable execution whose lease another worker now holds (or that
	// expired): whatever it would write next is no longer its to write.
	ErrLeaseLost = apperr.Conflict("lease_lost", "the durable run's lease was lost")
)

// activeStatuses are the statuses of a durable run that a worker may hold and execute.
var activeStatuses = []string{StatusCreated, StatusStreaming}

// checkpointRow is the run_checkpoints table.
type checkpointRow struct {
	RunID     string `gorm:"primaryKey"`
	NodeKey   string `gorm:"primaryKey"`
	Result    string
	CreatedAt time.Time
}

func (checkpointRow) TableName() string { return "run_checkpoints" }

// leaseStore is durable mode's view of the runs table: claims, renewals, checkpoints and the
// ends of durable runs, every write conditional on the lease (never FOR UPDATE, which SQLite
// does not have). One process has one owner id.
type leaseStore struct {
	db    *database.DB
	owner string
	ttl   time.Duration
	now   func() time.Time
}

func (l *leaseStore) stamp() time.Time { return l.now().UTC().Truncate(time.Microsecond) }

// claimable lists durable runs to execute whose lease is free or expired, oldest first.
func (l *leaseStore) claimable(ctx context.Context, limit int) ([]string, error) {
	var ids []string
	err := l.db.WithContext(ctx).Model(&row{}).
		Where("durable = ? AND status IN ? AND (lease_until IS NULL OR lease_until < ?)", true, activeStatuses, l.stamp()).
		Order("created_at, id").Limit(limit).Pluck("id", &ids).Error
	return ids, err
}

// claim takes the lease of a claimable run: a conditional update that exactly one of several
// racing workers wins. It returns the lease's expiry when won.
func (l *leaseStore) claim(ctx context.Context, id string) (until time.Time, won bool, err error) {
	now := l.stamp()
	until = now.Add(l.ttl)
	res := l.db.WithContext(ctx).Model(&row{}).
		Where("id = ? AND durable = ? AND status IN ? AND (lease_until IS NULL OR lease_until < ?)", id, true, activeStatuses, now).
		Updates(map[string]any{"lease_owner": l.owner, "lease_until": until, "status": StatusStreaming, "updated_at": now})
	return until, res.Error == nil && res.RowsAffected == 1, res.Error
}

// owned is the condition of every write a lease holder makes: still ours, not expired, and
// the run still executing.
func (l *leaseStore) owned(tx *gorm.DB, id string, now time.Time) *gorm.DB {
	return tx.Model(&row{}).Where("id = ? AND lease_owner = ? AND lease_until > ? AND status IN ?", id, l.owner, now, activeStatuses)
}

// renew extends a held lease (the heartbeat). won is false when the lease is no longer ours.
func (l *leaseStore) renew(ctx context.Context, id string) (until time.Time, won bool, err error) {
	now := l.stamp()
	until = now.Add(l.ttl)
	res := l.owned(l.db.WithContext(ctx), id, now).Updates(map[string]any{"lease_until": until, "updated_at": now})
	return until, res.Error == nil && res.RowsAffected == 1, res.Error
}

// save checkpoints one node result in the same transaction as the run's progress stamp,
// only while the lease is ours; ErrLeaseLost otherwise (and nothing is written).
func (l *leaseStore) save(ctx context.Context, id, key string, r runtime.NodeResult) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return l.db.Tx(ctx, func(tx *gorm.DB) error {
		now := l.stamp()
		res := l.owned(tx, id, now).Update("updated_at", now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return ErrLeaseLost.Msg("run %s: lease lost before node %q could be checkpointed", id, key)
		}
		return upsertCheckpoint(tx, id, key, string(b), now)
	})
}

func upsertCheckpoint(tx *gorm.DB, id, key, result string, now time.Time) error {
	return tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "run_id"}, {Name: "node_key"}},
		DoUpdates: clause.AssignmentColumns([]string{"result", "created_at"}),
	}).Create(&checkpointRow{RunID: id, NodeKey: key, Result: result, CreatedAt: now}).Error
}

// checkpoints loads every stored node result of a run.
func (l *leaseStore) checkpoints(ctx context.Context, id string) (map[string]runtime.NodeResult, error) {
	var rows []checkpointRow
	if err := l.db.WithContext(ctx).Where("run_id = ?", id).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]runtime.NodeResult, len(rows))
	for _, r := range rows {
		var nr runtime.NodeResult
		if err := json.Unmarshal([]byte(r.Result), &nr); err != nil {
			return nil, errors.New("checkpoint " + r.NodeKey + " is not valid JSON")
		}
		out[r.NodeKey] = nr
	}
	return out, nil
}

// park moves a held run to waiting at a human node and releases the lease.
func (l *leaseStore) park(ctx context.Context, id, node, prompt, note string) (bool, error) {
	now := l.stamp()
	res := l.owned(l.db.WithContext(ctx), id, now).Updates(map[string]any{
		"status": StatusWaiting, "awaiting_node": node, "prompt": prompt, "note": note,
		"lease_owner": nil, "lease_until": nil, "updated_at": now,
	})
	return res.RowsAffected == 1, res.Error
}

// finish records the end of a held run (completed or failed) and releases the lease.
func (l *leaseStore) finish(ctx context.Context, id string, out RunOutcome) (bool, error) {
	now := l.stamp()
	if out.CompletedAt.IsZero() {
		out.CompletedAt = now
	}
	fields := map[string]any{
		"status": out.Status, "note": out.Note, "updated_at": now,
		"completed_at":  out.CompletedAt.UTC().Truncate(time.Microsecond),
		"awaiting_node": nil, "prompt": nil, "lease_owner": nil, "lease_until": nil,
		"error_code": nil, "error_message": nil,
	}
	o, err := encodeJSON(out.Output)
	if err != nil {
		o = nil
		fields["note"] = joinNote(out.Note, "the output could not be stored as JSON")
	}
	fields["output"] = o
	if out.ErrorCode != "" {
		fields["error_code"], fields["error_message"] = out.ErrorCode, out.ErrorMessage
	}
	res := l.owned(l.db.WithContext(ctx), id, now).Updates(fields)
	return res.RowsAffected == 1, res.Error
}

// release gives a held lease back so that any worker may claim the run from retryAt on
// (now when zero): on a graceful stop, or to retry after a checkpoint could not be written.
func (l *leaseStore) release(ctx context.Context, id string, retryAt time.Time) error {
	var until any
	if !retryAt.IsZero() {
		until = retryAt.UTC().Truncate(time.Microsecond)
	}
	now := l.stamp()
	// lease_until > now is not required: an expired lease nobody claimed is still ours to give.
	return l.db.WithContext(ctx).Model(&row{}).
		Where("id = ? AND lease_owner = ? AND status IN ?", id, l.owner, activeStatuses).
		Updates(map[string]any{"lease_owner": nil, "lease_until": until, "updated_at": now}).Error
}

// resume saves the resume input as the awaiting human node's result and makes the run
// claimable again, in one transaction whose first statement is conditional on the run still
// waiting at that node: of two racing resumes exactly one changes a row.
func (l *leaseStore) resume(ctx context.Context, id string, input any) (node string, err error) {
	var r row
	err = l.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if database.IsNotFound(err) {
		return "", ErrRunNotFound.Msg("run %q not found", id).WithDetails(map[string]any{"id": id})
	}
	if err != nil {
		return "", err
	}
	if r.Status != StatusWaiting || r.AwaitingNode == nil || !r.Durable {
		return "", notWaiting(id, r.Status)
	}
	node = *r.AwaitingNode
	b, err := json.Marshal(runtime.HumanResult(input))
	if err != nil {
		return "", invalid("input", "is not serialisable as JSON")
	}
	err = l.db.Tx(ctx, func(tx *gorm.DB) error {
		now := l.stamp()
		res := tx.Model(&row{}).Where("id = ? AND status = ? AND awaiting_node = ?", id, StatusWaiting, node).
			Updates(map[string]any{
				"status": StatusStreaming, "awaiting_node": nil, "prompt": nil,
				"lease_owner": nil, "lease_until": nil, "updated_at": now,
			})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return notWaiting(id, "")
		}
		return upsertCheckpoint(tx, id, node, string(b), now)
	})
	return node, err
}

func notWaiting(id, status string) error {
	d := map[string]any{"id": id}
	msg := "run %q is not waiting at a human node"
	if status != "" {
		d["status"] = status
		msg += " (it is " + status + ")"
	} else {
		msg += " (another resume won)"
	}
	return ErrRunNotWaiting.Msg(msg, id).WithDetails(d)
}

// runCheckpoints is the runtime's NodeResultStore for one held durable run. A save that finds
// the lease gone calls lost, which cancels the execution.
type runCheckpoints struct {
	l     *leaseStore
	runID string
	lost  func(error)
}

// Load returns the run's checkpoints.
func (c *runCheckpoints) Load(ctx context.Context) (map[string]runtime.NodeResult, error) {
	return c.l.checkpoints(ctx, c.runID)
}

// Save checkpoints one node result under the lease.
func (c *runCheckpoints) Save(ctx context.Context, key string, r runtime.NodeResult) error {
	err := c.l.save(ctx, c.runID, key, r)
	if errors.Is(err, ErrLeaseLost) {
		c.lost(err)
	}
	return err
}

package triggers

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"hash/fnv"
	"sync"
	"time"
)

// errNotLeader tells gocron that this replica must not run the job.
var errNotLeader = errors.New("another replica leads the trigger schedules")

// AdvisoryElector is a gocron Elector on a PostgreSQL session advisory lock: the replica
// whose session holds the lock leads, and keeps leading while that one connection lives.
// The connection is taken out of the pool for as long as the lock is held, so the lock is
// never returned to the pool with it. When the connection dies the server drops the lock
// and the next replica to ask takes it.
type AdvisoryElector struct {
	db *sql.DB

	mu    sync.Mutex // guards key, keyed and conn; IsLeader is called from gocron's executor goroutines
	key   int64
	keyed bool
	conn  *sql.Conn // non-nil while this replica holds the lock
}

// NewAdvisoryElector builds an elector on lock key (see LockKey).
func NewAdvisoryElector(db *sql.DB, key int64) *AdvisoryElector {
	return &AdvisoryElector{db: db, key: key, keyed: true}
}

// NewSchemaElector builds an elector whose key is LockKey of db, computed on first use (the
// database may still be down when the plane is built).
func NewSchemaElector(db *sql.DB) *AdvisoryElector {
	return &AdvisoryElector{db: db}
}

// LockKey derives the advisory lock key of the trigger scheduler from the database and
// schema names: advisory locks are database-wide, so two deployments (or two test schemas)
// sharing one PostgreSQL database must not share a leader.
func LockKey(ctx context.Context, db *sql.DB) (int64, error) {
	var dbName, schema string
	if err := db.QueryRowContext(ctx, "SELECT current_database(), current_schema()").Scan(&dbName, &schema); err != nil {
		return 0, err
	}
	h := fnv.New64a()
	h.Write([]byte("svc/triggers/scheduler\x00" + dbName + "\x00" + schema))
	return int64(h.Sum64()), nil
}

// IsLeader returns nil when this replica holds (or has just taken) the lock.
func (e *AdvisoryElector) IsLeader(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil {
		if err := e.alive(ctx); err == nil {
			return nil
		}
		// The session is gone (or unusable), and with it the lock: let go of it and compete
		// again like any other replica.
		e.discard()
	}
	if !e.keyed {
		key, err := LockKey(ctx, e.db)
		if err != nil {
			return err
		}
		e.key, e.keyed = key, true
	}
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return err
	}
	var got bool
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := conn.QueryRowContext(qctx, "SELECT pg_try_advisory_lock($1)", e.key).Scan(&got); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
		return err
	}
	if !got {
		_ = conn.Close() // no lock taken: the connection goes back to the pool clean
		return errNotLeader
	}
	e.conn = conn
	return nil
}

// alive checks the lock's session still answers.
func (e *AdvisoryElector) alive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var one int
	return e.conn.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// discard closes the lock's connection for good (never back to the pool, where the lock
// would stay held by an idle session).
func (e *AdvisoryElector) discard() {
	_ = e.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = e.conn.Close()
	e.conn = nil
}

// Leading reports whether this replica currently holds the lock (without checking the
// connection).
func (e *AdvisoryElector) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conn != nil
}

// Release gives the lock up (on shutdown) so that another replica can lead at once.
func (e *AdvisoryElector) Release(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, _ = e.conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", e.key)
	e.discard() // closing the session drops the lock even when the unlock did not get through
}

-- +goose Up
-- Run records. input and output hold JSON text. A deleted session detaches its runs
-- (session_id becomes NULL) rather than deleting them. lease_owner and lease_until are for
-- durable mode's claims (conditional updates, never FOR UPDATE).
CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    status        TEXT NOT NULL,
    kind          TEXT NOT NULL,
    input         TEXT,
    output        TEXT,
    error_code    TEXT,
    error_message TEXT,
    note          TEXT NOT NULL DEFAULT '',
    model         TEXT,
    agent_id      TEXT,
    version       TEXT,
    content_hash  TEXT,
    trigger_id    TEXT,
    session_id    TEXT REFERENCES sessions (id) ON DELETE SET NULL,
    awaiting_node TEXT,
    prompt        TEXT,
    durable       BOOLEAN NOT NULL DEFAULT 0,
    lease_owner   TEXT,
    lease_until   DATETIME,
    created_at    DATETIME NOT NULL,
    updated_at    DATETIME NOT NULL,
    completed_at  DATETIME
);
CREATE INDEX runs_created ON runs (created_at DESC, id DESC);
CREATE INDEX runs_agent ON runs (agent_id, created_at DESC, id DESC);
CREATE INDEX runs_session ON runs (session_id, created_at DESC, id DESC);
CREATE INDEX runs_trigger ON runs (trigger_id, created_at DESC, id DESC);
CREATE INDEX runs_status ON runs (status, created_at DESC, id DESC);

-- +goose Down
DROP TABLE runs;

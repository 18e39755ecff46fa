-- +goose Up
-- One row per traced run: the trace id and the I/O capture policy in force when the run's
-- first spans were written (GET /runs/{id}/nodes/{node_id}/io reports gates from it).
CREATE TABLE trace_runs (
    run_id               TEXT PRIMARY KEY,
    trace_id             TEXT NOT NULL,
    agent_id             TEXT NOT NULL DEFAULT '',
    io_capture           TEXT NOT NULL,
    io_retention_seconds INTEGER,
    created_at           DATETIME NOT NULL
);

-- The span tree of a run: run, node, iteration, model_call and tool_call spans. No payloads.
CREATE TABLE trace_spans (
    run_id        TEXT NOT NULL,
    span_id       TEXT NOT NULL,
    parent_id     TEXT NOT NULL DEFAULT '',
    name          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    node_id       TEXT NOT NULL DEFAULT '',
    node_kind     TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL,
    start_at      DATETIME NOT NULL,
    end_at        DATETIME,
    duration_ms   INTEGER,
    attrs         TEXT NOT NULL DEFAULT '{}',
    error_code    TEXT NOT NULL DEFAULT '',
    error_message TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, span_id)
);
CREATE INDEX trace_spans_node ON trace_spans (run_id, node_id);

-- Per-node captured I/O, already redacted. input/output are JSON text (NULL when not kept);
-- the *_meta columns describe each port (type, size) without its content.
CREATE TABLE trace_node_io (
    run_id      TEXT NOT NULL,
    node_id     TEXT NOT NULL,
    capture     TEXT NOT NULL,
    input       TEXT,
    output      TEXT,
    input_meta  TEXT NOT NULL DEFAULT '{}',
    output_meta TEXT NOT NULL DEFAULT '{}',
    captured_at DATETIME NOT NULL,
    expires_at  DATETIME,
    purged_at   DATETIME,
    PRIMARY KEY (run_id, node_id)
);
CREATE INDEX trace_node_io_expiry ON trace_node_io (expires_at) WHERE expires_at IS NOT NULL AND purged_at IS NULL;

-- +goose Down
DROP TABLE trace_node_io;
DROP TABLE trace_spans;
DROP TABLE trace_runs;

-- +goose Up
-- Durable mode: one row per settled node of a durable run (namespaced node key, e.g. "a",
-- "loop/2/inner", "map[3]", "sub#pin"), written in the same transaction as the run's
-- progress and only while the writer still holds the run's lease.
CREATE TABLE run_checkpoints (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    node_key   TEXT NOT NULL,
    result     TEXT NOT NULL,
    created_at DATETIME NOT NULL,
    PRIMARY KEY (run_id, node_key)
);
-- The worker's poll: durable runs still to execute whose lease is free or expired.
CREATE INDEX runs_durable_claim ON runs (durable, status, lease_until);

-- +goose Down
DROP INDEX runs_durable_claim;
DROP TABLE run_checkpoints;

-- +goose Up
-- The bench store: recorded results, named parameter presets and golden-case suites.
-- params, metrics, labels, input, expected and tags are compact JSON text.
CREATE TABLE bench_suites (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    case_count  INTEGER NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX bench_suites_created ON bench_suites (created_at DESC, id DESC);

-- seq keeps the cases in the order they were submitted.
CREATE TABLE bench_cases (
    suite_id TEXT NOT NULL REFERENCES bench_suites (id),
    case_id  TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    input    TEXT NOT NULL,
    expected TEXT,
    tags     TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (suite_id, case_id),
    UNIQUE (suite_id, seq)
);

CREATE TABLE bench_presets (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    params      TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX bench_presets_created ON bench_presets (created_at DESC, name DESC);

-- Results outlive presets (preset is a label, not a reference); suite_id/case_id were checked
-- against the stored suites when the result was recorded, and suites are never deleted.
CREATE TABLE bench_results (
    id         TEXT PRIMARY KEY,
    logical_id TEXT,
    agent_id   TEXT,
    suite_id   TEXT,
    case_id    TEXT,
    preset     TEXT,
    params     TEXT,
    metrics    TEXT NOT NULL,
    labels     TEXT,
    notes      TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX bench_results_created ON bench_results (created_at DESC, id DESC);
CREATE INDEX bench_results_logical ON bench_results (logical_id, created_at DESC, id DESC);
CREATE INDEX bench_results_agent ON bench_results (agent_id, created_at DESC, id DESC);
CREATE INDEX bench_results_suite ON bench_results (suite_id, case_id, created_at DESC, id DESC);

-- +goose Down
DROP TABLE bench_results;
DROP TABLE bench_presets;
DROP TABLE bench_cases;
DROP TABLE bench_suites;

-- +goose Up
-- Agents and their immutable, content-addressed versions. The I/O capture policy lives on the
-- agent row: it never touches a version, so it never changes a content hash.
CREATE TABLE agents (
    id                   TEXT PRIMARY KEY,
    name                 TEXT NOT NULL DEFAULT '',
    io_capture           TEXT NOT NULL DEFAULT 'metadata',
    io_retention_seconds INTEGER,
    redact_rules         TEXT NOT NULL DEFAULT '[]',
    created_at           DATETIME NOT NULL,
    updated_at           DATETIME NOT NULL
);
CREATE INDEX agents_created ON agents (created_at DESC, id DESC);

-- seq is the publish order (1, 2, …) within an agent: "newest first" and "latest" use it.
CREATE TABLE agent_versions (
    agent_id     TEXT NOT NULL REFERENCES agents (id),
    version      TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    ir           TEXT NOT NULL,
    canvas       TEXT,
    created_at   DATETIME NOT NULL,
    PRIMARY KEY (agent_id, version),
    UNIQUE (agent_id, seq)
);
CREATE INDEX agent_versions_hash ON agent_versions (agent_id, content_hash);

-- +goose Down
DROP TABLE agent_versions;
DROP TABLE agents;

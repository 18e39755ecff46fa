-- +goose Up
CREATE TABLE mcp_servers (
    name TEXT PRIMARY KEY,
    transport TEXT NOT NULL,
    command TEXT NOT NULL DEFAULT '',
    args TEXT NOT NULL DEFAULT '[]',
    url TEXT NOT NULL DEFAULT '',
    env_secret TEXT,
    header_secret TEXT,
    env_keys TEXT NOT NULL DEFAULT '[]',
    header_keys TEXT NOT NULL DEFAULT '[]',
    connection TEXT NOT NULL DEFAULT '',
    timeout_ms INTEGER NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE mcp_servers;

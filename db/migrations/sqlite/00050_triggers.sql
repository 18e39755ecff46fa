-- +goose Up
-- Triggers start runs of a pinned agent version: on a cron schedule or on a signed webhook.
-- Exactly one of version/content_hash is set (the pin, immutable). config is JSON; for a
-- webhook it never holds the secret: secret is the ciphertext ("v1:<keyid>:…", bound to the
-- row id), never the plaintext. revision grows on every change so that a scheduler replica
-- holding a stale copy cannot fire it (the firing claim checks it). last_fired_at is the
-- schedule window most recently claimed; a window fires only when it is later than this.
-- No foreign key to agents: versions are immutable and never deleted, and the pin is
-- checked when the trigger is created.
CREATE TABLE triggers (
    id            TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL,
    kind          TEXT NOT NULL,
    version       TEXT,
    content_hash  TEXT,
    config        TEXT NOT NULL,
    secret        TEXT,
    enabled       BOOLEAN NOT NULL DEFAULT 1,
    revision      INTEGER NOT NULL DEFAULT 1,
    last_fired_at DATETIME,
    created_at    DATETIME NOT NULL,
    updated_at    DATETIME NOT NULL,
    CHECK ((version IS NULL) <> (content_hash IS NULL))
);
CREATE INDEX triggers_created ON triggers (created_at DESC, id DESC);
CREATE INDEX triggers_kind ON triggers (kind);

-- +goose Down
DROP TABLE triggers;

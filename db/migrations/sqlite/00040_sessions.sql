-- +goose Up
-- Conversational sessions. updated_at is the last activity (creation or an appended turn):
-- listings are newest activity first.
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    metadata   TEXT NOT NULL DEFAULT '{}',
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);
CREATE INDEX sessions_activity ON sessions (updated_at DESC, id DESC);

-- One row per turn (a user message and the assistant's answer); the serial id keeps the
-- order without a per-session counter that concurrent appends would fight over.
CREATE TABLE session_turns (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id        TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_content      TEXT NOT NULL,
    assistant_content TEXT NOT NULL,
    created_at        DATETIME NOT NULL
);
CREATE INDEX session_turns_session ON session_turns (session_id, id);

-- +goose Down
DROP TABLE session_turns;
DROP TABLE sessions;

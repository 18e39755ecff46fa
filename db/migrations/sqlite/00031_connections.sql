-- +goose Up
-- Named tool credentials. secret holds the ciphertext ("v1:<keyid>:…", bound to the row id),
-- never the plaintext; NULL when the connection has no secret.
CREATE TABLE connections (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,
    config     TEXT NOT NULL,
    secret     TEXT,
    enabled    BOOLEAN NOT NULL DEFAULT 1,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);
CREATE INDEX connections_created ON connections (created_at DESC, id DESC);

-- +goose Down
DROP TABLE connections;

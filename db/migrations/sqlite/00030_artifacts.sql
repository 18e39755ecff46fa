-- +goose Up
-- Artifact metadata; the bytes live under $SERVICE_DATA_DIR/artifacts/.
CREATE TABLE artifacts (
    ref          TEXT PRIMARY KEY,
    content_type TEXT NOT NULL,
    bytes        INTEGER NOT NULL,
    sha256       TEXT NOT NULL,
    created_at   DATETIME NOT NULL
);

-- +goose Down
DROP TABLE artifacts;

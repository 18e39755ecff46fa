-- +goose Up
-- Artifact metadata; the bytes live under $SERVICE_DATA_DIR/artifacts/.
CREATE TABLE artifacts (
    ref          TEXT PRIMARY KEY,
    content_type TEXT NOT NULL,
    bytes        BIGINT NOT NULL,
    sha256       TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE artifacts;

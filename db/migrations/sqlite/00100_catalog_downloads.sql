-- +goose Up
-- Download-and-install jobs of the model catalog. files is compact JSON
-- ([{name,size,sha256}]); state is queued, downloading, verifying, completed, failed or canceled.
CREATE TABLE catalog_downloads (
    id          TEXT PRIMARY KEY,
    repo        TEXT NOT NULL,
    engine      TEXT NOT NULL,
    variant_id  TEXT NOT NULL,
    logical_id  TEXT NOT NULL,
    modality    TEXT NOT NULL,
    state       TEXT NOT NULL,
    error       TEXT NOT NULL DEFAULT '',
    files       TEXT NOT NULL,
    bytes_done  BIGINT NOT NULL DEFAULT 0,
    bytes_total BIGINT NOT NULL DEFAULT 0,
    model_path  TEXT NOT NULL DEFAULT '',
    created_at  DATETIME NOT NULL,
    updated_at  DATETIME NOT NULL,
    finished_at DATETIME
);
CREATE INDEX catalog_downloads_created ON catalog_downloads (created_at DESC, id DESC);
CREATE INDEX catalog_downloads_state ON catalog_downloads (state);

-- +goose Down
DROP TABLE catalog_downloads;

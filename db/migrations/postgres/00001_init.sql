-- +goose Up
-- Foundation: a table that records facts about this installation.
CREATE TABLE svc_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- +goose Down
DROP TABLE svc_meta;

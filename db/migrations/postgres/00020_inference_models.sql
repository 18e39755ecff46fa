-- +goose Up
-- Inference-plane model registry: one row per logical id. spec holds the registration as
-- JSON (its shape depends on the binding, so new bindings need no schema change); revision
-- grows on every replace and keys the capabilities cache.
CREATE TABLE inference_models (
    id         TEXT PRIMARY KEY,
    binding    TEXT NOT NULL,
    spec       TEXT NOT NULL,
    revision   BIGINT NOT NULL DEFAULT 1,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE inference_models;

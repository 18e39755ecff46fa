-- +goose Up
-- Local credentials for remote-model bindings (credentialRef secret://NAME). ciphertext is
-- "v1:<keyid>:…" sealed with SERVICE_SECRET_KEY and bound to "credential:"+name; the
-- plaintext is never stored.
CREATE TABLE inference_credentials (
    name       TEXT PRIMARY KEY,
    ciphertext TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE inference_credentials;

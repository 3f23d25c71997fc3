-- A build's secrets, sealed with the secrets key (envelope encryption), kept only while the
-- build runs: FinishBuild deletes them.
CREATE TABLE build_secrets (
    build_id   TEXT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    ciphertext BLOB NOT NULL,
    PRIMARY KEY (build_id, name)
);

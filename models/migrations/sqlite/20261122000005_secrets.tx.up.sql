-- The secret stores: environment variables per environment, member secrets per person, and
-- provider credentials (bring-your-own-key) per person or team. Values are sealed with the
-- secrets key (envelope encryption, bound to the row id); masked_value is what listings show.
CREATE TABLE env_vars (
    id           TEXT PRIMARY KEY,
    team_id      TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    registry_id  TEXT NOT NULL REFERENCES registries (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    ciphertext   BLOB NOT NULL,
    masked_value TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    UNIQUE (registry_id, name)
);
--bun:split
CREATE TABLE member_secrets (
    id            TEXT PRIMARY KEY,
    team_id       TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    membership_id INTEGER NOT NULL REFERENCES memberships (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    provider      TEXT,
    ciphertext    BLOB NOT NULL,
    masked_value  TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    UNIQUE (membership_id, name)
);
--bun:split
CREATE UNIQUE INDEX member_secrets_provider_idx ON member_secrets (membership_id, provider) WHERE provider IS NOT NULL;
--bun:split
CREATE TABLE byok_credentials (
    id            TEXT PRIMARY KEY,
    team_id       TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    scope         TEXT NOT NULL,
    membership_id INTEGER REFERENCES memberships (id) ON DELETE CASCADE,
    owner_key     TEXT NOT NULL,
    provider      TEXT NOT NULL,
    name          TEXT NOT NULL,
    ciphertext    BLOB NOT NULL,
    masked_value  TEXT NOT NULL,
    created_by    INTEGER,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    last_used_at  TEXT,
    UNIQUE (team_id, owner_key, provider)
);

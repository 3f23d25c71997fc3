-- The secret stores: environment variables per environment, member secrets per person, and
-- provider credentials (bring-your-own-key) per person or team. Values are sealed with the
-- secrets key (envelope encryption, bound to the row id); masked_value is what listings show.
CREATE TABLE env_vars (
    id           UUID PRIMARY KEY,
    team_id      UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    registry_id  UUID NOT NULL REFERENCES registries (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    ciphertext   BYTEA NOT NULL,
    masked_value TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    UNIQUE (registry_id, name)
);
--bun:split
CREATE TABLE member_secrets (
    id            UUID PRIMARY KEY,
    team_id       UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    membership_id BIGINT NOT NULL REFERENCES memberships (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    provider      TEXT,
    ciphertext    BYTEA NOT NULL,
    masked_value  TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    UNIQUE (membership_id, name)
);
--bun:split
CREATE UNIQUE INDEX member_secrets_provider_idx ON member_secrets (membership_id, provider) WHERE provider IS NOT NULL;
--bun:split
CREATE TABLE byok_credentials (
    id            UUID PRIMARY KEY,
    team_id       UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    scope         TEXT NOT NULL,
    membership_id BIGINT REFERENCES memberships (id) ON DELETE CASCADE,
    owner_key     TEXT NOT NULL,
    provider      TEXT NOT NULL,
    name          TEXT NOT NULL,
    ciphertext    BYTEA NOT NULL,
    masked_value  TEXT NOT NULL,
    created_by    BIGINT,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    last_used_at  TIMESTAMPTZ,
    UNIQUE (team_id, owner_key, provider)
);

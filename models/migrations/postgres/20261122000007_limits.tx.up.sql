-- Spending limits: a ceiling in USD per week or month for one API key or one member, which
-- alerts or blocks once the period's spend reaches threshold_percent of it.
CREATE TABLE spending_limits (
    id                UUID PRIMARY KEY,
    team_id           UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    api_key_id        UUID REFERENCES api_keys (id) ON DELETE CASCADE,
    membership_id     BIGINT REFERENCES memberships (id) ON DELETE CASCADE,
    parent_limit_id   UUID REFERENCES spending_limits (id) ON DELETE SET NULL,
    threshold_percent DOUBLE PRECISION NOT NULL,
    period            TEXT NOT NULL,
    amount_usd        DOUBLE PRECISION NOT NULL,
    action            TEXT NOT NULL,
    enabled           BOOLEAN NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL
);
--bun:split
CREATE INDEX spending_limits_team_idx ON spending_limits (team_id);
--bun:split
CREATE INDEX inference_logs_key_idx ON inference_logs (api_key_id, created_at);
--bun:split
CREATE INDEX inference_logs_user_idx ON inference_logs (user_id, created_at);

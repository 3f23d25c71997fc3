-- Daily usage per team and every dimension the usage routes group or filter by, kept beside
-- inference_logs as each call is recorded, so that a month of daily buckets reads thousands of
-- rows rather than millions. Absent ids are '' so that they can be part of the key.
CREATE TABLE inference_daily (
    team_id           UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    day               TEXT NOT NULL,
    model_id          TEXT NOT NULL,
    user_id           TEXT NOT NULL,
    api_key_id        TEXT NOT NULL,
    byok_credential   TEXT NOT NULL,
    byok              BOOLEAN NOT NULL,
    route             TEXT NOT NULL,
    requests          BIGINT NOT NULL,
    cost              DOUBLE PRECISION NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    PRIMARY KEY (team_id, day, model_id, user_id, api_key_id, byok_credential, byok, route)
);
--bun:split
INSERT INTO inference_daily
SELECT team_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), CAST(model_id AS TEXT), COALESCE(CAST(user_id AS TEXT), ''),
       COALESCE(CAST(api_key_id AS TEXT), ''), COALESCE(CAST(byok_credential_id AS TEXT), ''), byok, route,
       count(*), SUM(cost), SUM(prompt_tokens), SUM(completion_tokens)
FROM inference_logs
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;

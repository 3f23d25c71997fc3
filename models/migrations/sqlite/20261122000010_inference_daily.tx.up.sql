-- Daily usage per team and every dimension the usage routes group or filter by, kept beside
-- inference_logs as each call is recorded, so that a month of daily buckets reads thousands of
-- rows rather than millions. Absent ids are '' so that they can be part of the key.
CREATE TABLE inference_daily (
    team_id           TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    day               TEXT NOT NULL,
    model_id          TEXT NOT NULL,
    user_id           TEXT NOT NULL,
    api_key_id        TEXT NOT NULL,
    byok_credential   TEXT NOT NULL,
    byok              INTEGER NOT NULL,
    route             TEXT NOT NULL,
    requests          INTEGER NOT NULL,
    cost              REAL NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    PRIMARY KEY (team_id, day, model_id, user_id, api_key_id, byok_credential, byok, route)
);
--bun:split
INSERT INTO inference_daily
SELECT team_id, substr(created_at, 1, 10), model_id, COALESCE(user_id, ''), COALESCE(api_key_id, ''), COALESCE(byok_credential_id, ''),
       byok, route, count(*), SUM(cost), SUM(prompt_tokens), SUM(completion_tokens)
FROM inference_logs
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;

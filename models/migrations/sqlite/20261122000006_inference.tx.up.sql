-- The inference gateway's record: one row per model call (an agent's step or a completion), with
-- its tokens and cost, and the key it was billed to.
ALTER TABLE llm_models ADD COLUMN output_cost_per_token REAL NOT NULL DEFAULT 0;
--bun:split
CREATE TABLE inference_logs (
    id                 TEXT PRIMARY KEY,
    team_id            TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    model_id           TEXT NOT NULL REFERENCES llm_models (id) ON DELETE CASCADE,
    route              TEXT NOT NULL,
    status             TEXT NOT NULL,
    error_code         TEXT NOT NULL DEFAULT '',
    prompt_tokens      INTEGER NOT NULL,
    completion_tokens  INTEGER NOT NULL,
    total_tokens       INTEGER NOT NULL,
    cost               REAL NOT NULL,
    duration_ms        INTEGER NOT NULL,
    streaming          INTEGER NOT NULL DEFAULT 0,
    trace_id           TEXT,
    user_id            TEXT,
    api_key_id         TEXT,
    byok               INTEGER NOT NULL DEFAULT 0,
    byok_credential_id TEXT,
    created_at         TEXT NOT NULL
);
--bun:split
CREATE INDEX inference_logs_model_idx ON inference_logs (model_id, team_id, created_at);
--bun:split
CREATE INDEX inference_logs_team_idx ON inference_logs (team_id, created_at);
--bun:split
CREATE INDEX inference_logs_trace_idx ON inference_logs (trace_id);

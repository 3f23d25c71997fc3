-- The inference gateway's record: one row per model call (an agent's step or a completion), with
-- its tokens and cost, and the key it was billed to.
ALTER TABLE llm_models ADD COLUMN output_cost_per_token DOUBLE PRECISION NOT NULL DEFAULT 0;
--bun:split
CREATE TABLE inference_logs (
    id                 UUID PRIMARY KEY,
    team_id            UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    model_id           UUID NOT NULL REFERENCES llm_models (id) ON DELETE CASCADE,
    route              TEXT NOT NULL,
    status             TEXT NOT NULL,
    error_code         TEXT NOT NULL DEFAULT '',
    prompt_tokens      INTEGER NOT NULL,
    completion_tokens  INTEGER NOT NULL,
    total_tokens       INTEGER NOT NULL,
    cost               DOUBLE PRECISION NOT NULL,
    duration_ms        INTEGER NOT NULL,
    streaming          BOOLEAN NOT NULL DEFAULT FALSE,
    trace_id           UUID,
    user_id            UUID,
    api_key_id         UUID,
    byok               BOOLEAN NOT NULL DEFAULT FALSE,
    byok_credential_id UUID,
    created_at         TIMESTAMPTZ NOT NULL
);
--bun:split
CREATE INDEX inference_logs_model_idx ON inference_logs (model_id, team_id, created_at);
--bun:split
CREATE INDEX inference_logs_team_idx ON inference_logs (team_id, created_at);
--bun:split
CREATE INDEX inference_logs_trace_idx ON inference_logs (trace_id);

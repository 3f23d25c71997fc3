-- Instances: every sandbox an attempt's try ran in, with its resources and the hourly rate it
-- was priced at when it started; the cost is fixed when it ends. Jobs remember the API key that
-- launched them, so that key-scoped usage and limits count the attempts the key launched.
ALTER TABLE jobs ADD COLUMN api_key_id UUID REFERENCES api_keys (id) ON DELETE SET NULL;
--bun:split
CREATE TABLE instances (
    id               UUID PRIMARY KEY,
    team_id          UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    trace_id         UUID NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    attempt          INTEGER NOT NULL,
    job_id           UUID NOT NULL,
    registry_id      UUID,
    build_id         UUID,
    user_id          UUID,
    api_key_id       UUID,
    host_queue       TEXT NOT NULL,
    sandbox_id       TEXT NOT NULL,
    cpu              DOUBLE PRECISION NOT NULL,
    memory_mb        INTEGER NOT NULL,
    gpu_count        INTEGER NOT NULL,
    gpu_type         TEXT NOT NULL,
    limits           JSONB,
    hourly_rate      DOUBLE PRECISION NOT NULL,
    baseline_minutes DOUBLE PRECISION NOT NULL,
    status           TEXT NOT NULL,
    stop_reason      TEXT NOT NULL DEFAULT '',
    duration_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
    cost             DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at       TIMESTAMPTZ NOT NULL,
    terminated_at    TIMESTAMPTZ
);
--bun:split
CREATE INDEX instances_team_idx ON instances (team_id, created_at);
--bun:split
CREATE INDEX instances_registry_idx ON instances (registry_id, status, created_at);
--bun:split
CREATE INDEX instances_trace_idx ON instances (trace_id);
--bun:split
CREATE INDEX instances_job_idx ON instances (job_id);
--bun:split
CREATE INDEX instances_running_idx ON instances (status) WHERE status = 'running';
--bun:split
CREATE INDEX instances_key_idx ON instances (api_key_id, created_at);
--bun:split
CREATE INDEX instances_user_idx ON instances (user_id, created_at);
--bun:split
-- A taskset is an evaluation suite (EVAL, the default) or training data (TRAINING); model
-- results and suggestions filter by it.
ALTER TABLE tasksets ADD COLUMN purpose TEXT NOT NULL DEFAULT 'EVAL';
--bun:split
CREATE INDEX traces_model_idx ON traces (model_id, team_id);

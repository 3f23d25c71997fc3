-- Instances: every sandbox an attempt's try ran in, with its resources and the hourly rate it
-- was priced at when it started; the cost is fixed when it ends. Jobs remember the API key that
-- launched them, so that key-scoped usage and limits count the attempts the key launched.
ALTER TABLE jobs ADD COLUMN api_key_id TEXT REFERENCES api_keys (id) ON DELETE SET NULL;
--bun:split
CREATE TABLE instances (
    id               TEXT PRIMARY KEY,
    team_id          TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    trace_id         TEXT NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    attempt          INTEGER NOT NULL,
    job_id           TEXT NOT NULL,
    registry_id      TEXT,
    build_id         TEXT,
    user_id          TEXT,
    api_key_id       TEXT,
    host_queue       TEXT NOT NULL,
    sandbox_id       TEXT NOT NULL,
    cpu              REAL NOT NULL,
    memory_mb        INTEGER NOT NULL,
    gpu_count        INTEGER NOT NULL,
    gpu_type         TEXT NOT NULL,
    limits           TEXT,
    hourly_rate      REAL NOT NULL,
    baseline_minutes REAL NOT NULL,
    status           TEXT NOT NULL,
    stop_reason      TEXT NOT NULL DEFAULT '',
    duration_seconds REAL NOT NULL DEFAULT 0,
    cost             REAL NOT NULL DEFAULT 0,
    created_at       TEXT NOT NULL,
    terminated_at    TEXT
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

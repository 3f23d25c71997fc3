-- The rollout engine: a catalog of models agents run on, jobs (one batch run), traces (one attempt
-- each) with their append-only events, and the logs of each attempt (the worker's and the
-- environment's). Events and logs are keyed (trace_id, seq) so that a retried activity that
-- writes them again writes nothing twice.
CREATE TABLE llm_models (
    id                   UUID PRIMARY KEY,
    team_id              UUID REFERENCES teams (id) ON DELETE CASCADE,
    model_name           TEXT NOT NULL,
    name                 TEXT NOT NULL,
    provider             TEXT NOT NULL,
    adapter              TEXT NOT NULL,
    sdk_agent_type       TEXT NOT NULL DEFAULT '',
    base_url             TEXT NOT NULL DEFAULT '',
    api_key_env          TEXT NOT NULL DEFAULT '',
    context_window       INTEGER NOT NULL DEFAULT 0,
    hidden               BOOLEAN NOT NULL DEFAULT FALSE,
    input_cost_per_token DOUBLE PRECISION NOT NULL DEFAULT 0,
    request_defaults     JSONB NOT NULL DEFAULT '{}',
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL
);
--bun:split
CREATE UNIQUE INDEX llm_models_name_idx ON llm_models (model_name);
--bun:split
CREATE TABLE jobs (
    id             UUID PRIMARY KEY,
    team_id        UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    created_by     UUID REFERENCES users (id) ON DELETE SET NULL,
    taskset_id     UUID REFERENCES tasksets (id) ON DELETE SET NULL,
    name           TEXT NOT NULL DEFAULT '',
    description    TEXT NOT NULL DEFAULT '',
    status         TEXT NOT NULL,
    max_steps      INTEGER NOT NULL,
    group_size     INTEGER NOT NULL,
    max_concurrent INTEGER NOT NULL,
    is_remote      BOOLEAN NOT NULL DEFAULT FALSE,
    metadata       JSONB NOT NULL DEFAULT '{}',
    published_at   TIMESTAMPTZ,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL
);
--bun:split
CREATE INDEX jobs_team_created_idx ON jobs (team_id, created_at);
--bun:split
CREATE TABLE traces (
    id                     UUID PRIMARY KEY,
    team_id                UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    job_id                 UUID NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    task_id                UUID REFERENCES tasks (id) ON DELETE SET NULL,
    task_version_id        UUID REFERENCES task_versions (id) ON DELETE SET NULL,
    model_id               UUID REFERENCES llm_models (id) ON DELETE SET NULL,
    group_id               TEXT NOT NULL DEFAULT '',
    name                   TEXT NOT NULL DEFAULT '',
    description            TEXT NOT NULL DEFAULT '',
    status                 TEXT NOT NULL,
    stop_reason            TEXT NOT NULL DEFAULT '',
    error                  TEXT NOT NULL DEFAULT '',
    reward                 DOUBLE PRECISION,
    evaluation_result      JSONB,
    metadata               JSONB NOT NULL DEFAULT '{}',
    runtime_config         JSONB NOT NULL DEFAULT '{}',
    max_steps              INTEGER NOT NULL,
    is_valid               BOOLEAN NOT NULL DEFAULT TRUE,
    attempt                INTEGER NOT NULL DEFAULT 0,
    instance_id            UUID,
    start_time             TIMESTAMPTZ,
    end_time               TIMESTAMPTZ,
    created_at             TIMESTAMPTZ NOT NULL,
    updated_at             TIMESTAMPTZ NOT NULL
);
--bun:split
CREATE INDEX traces_job_idx ON traces (job_id, created_at);
--bun:split
CREATE INDEX traces_task_version_idx ON traces (task_version_id);
--bun:split
CREATE INDEX traces_team_created_idx ON traces (team_id, created_at);
--bun:split
CREATE TABLE trace_events (
    trace_id   UUID NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    id         TEXT NOT NULL,
    attempt    INTEGER NOT NULL DEFAULT 0,
    kind       TEXT NOT NULL,
    text       TEXT NOT NULL DEFAULT '',
    parent_id  TEXT NOT NULL DEFAULT '',
    data       JSONB NOT NULL DEFAULT '{}',
    superseded BOOLEAN NOT NULL DEFAULT FALSE,
    started_at TIMESTAMPTZ NOT NULL,
    ended_at   TIMESTAMPTZ,
    PRIMARY KEY (trace_id, seq)
);
--bun:split
CREATE TABLE trace_logs (
    trace_id UUID NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    source   TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    stream   TEXT NOT NULL,
    line     TEXT NOT NULL,
    time     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (trace_id, source, seq)
);

-- The rollout engine: a catalog of models agents run on, jobs (one batch run), traces (one attempt
-- each) with their append-only events, and the logs of each attempt (the worker's and the
-- environment's). Events and logs are keyed (trace_id, seq) so that a retried activity that
-- writes them again writes nothing twice.
CREATE TABLE llm_models (
    id                   TEXT PRIMARY KEY,
    team_id              TEXT REFERENCES teams (id) ON DELETE CASCADE,
    model_name           TEXT NOT NULL,
    name                 TEXT NOT NULL,
    provider             TEXT NOT NULL,
    adapter              TEXT NOT NULL,
    sdk_agent_type       TEXT NOT NULL DEFAULT '',
    base_url             TEXT NOT NULL DEFAULT '',
    api_key_env          TEXT NOT NULL DEFAULT '',
    context_window       INTEGER NOT NULL DEFAULT 0,
    hidden               INTEGER NOT NULL DEFAULT 0,
    input_cost_per_token REAL NOT NULL DEFAULT 0,
    request_defaults     TEXT NOT NULL DEFAULT '{}',
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL
);
--bun:split
CREATE UNIQUE INDEX llm_models_name_idx ON llm_models (model_name);
--bun:split
CREATE TABLE jobs (
    id             TEXT PRIMARY KEY,
    team_id        TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    created_by     TEXT REFERENCES users (id) ON DELETE SET NULL,
    taskset_id     TEXT REFERENCES tasksets (id) ON DELETE SET NULL,
    name           TEXT NOT NULL DEFAULT '',
    description    TEXT NOT NULL DEFAULT '',
    status         TEXT NOT NULL,
    max_steps      INTEGER NOT NULL,
    group_size     INTEGER NOT NULL,
    max_concurrent INTEGER NOT NULL,
    is_remote      INTEGER NOT NULL DEFAULT 0,
    metadata       TEXT NOT NULL DEFAULT '{}',
    published_at   TEXT,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);
--bun:split
CREATE INDEX jobs_team_created_idx ON jobs (team_id, created_at);
--bun:split
CREATE TABLE traces (
    id                     TEXT PRIMARY KEY,
    team_id                TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    job_id                 TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    task_id                TEXT REFERENCES tasks (id) ON DELETE SET NULL,
    task_version_id        TEXT REFERENCES task_versions (id) ON DELETE SET NULL,
    model_id               TEXT REFERENCES llm_models (id) ON DELETE SET NULL,
    group_id               TEXT NOT NULL DEFAULT '',
    name                   TEXT NOT NULL DEFAULT '',
    description            TEXT NOT NULL DEFAULT '',
    status                 TEXT NOT NULL,
    stop_reason            TEXT NOT NULL DEFAULT '',
    error                  TEXT NOT NULL DEFAULT '',
    reward                 REAL,
    evaluation_result      TEXT,
    metadata               TEXT NOT NULL DEFAULT '{}',
    runtime_config         TEXT NOT NULL DEFAULT '{}',
    max_steps              INTEGER NOT NULL,
    is_valid               INTEGER NOT NULL DEFAULT 1,
    attempt                INTEGER NOT NULL DEFAULT 0,
    instance_id            TEXT,
    start_time             TEXT,
    end_time               TEXT,
    created_at             TEXT NOT NULL,
    updated_at             TEXT NOT NULL
);
--bun:split
CREATE INDEX traces_job_idx ON traces (job_id, created_at);
--bun:split
CREATE INDEX traces_task_version_idx ON traces (task_version_id);
--bun:split
CREATE INDEX traces_team_created_idx ON traces (team_id, created_at);
--bun:split
CREATE TABLE trace_events (
    trace_id   TEXT NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    id         TEXT NOT NULL,
    attempt    INTEGER NOT NULL DEFAULT 0,
    kind       TEXT NOT NULL,
    text       TEXT NOT NULL DEFAULT '',
    parent_id  TEXT NOT NULL DEFAULT '',
    data       TEXT NOT NULL DEFAULT '{}',
    superseded INTEGER NOT NULL DEFAULT 0,
    started_at TEXT NOT NULL,
    ended_at   TEXT,
    PRIMARY KEY (trace_id, seq)
);
--bun:split
CREATE TABLE trace_logs (
    trace_id TEXT NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    source   TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    stream   TEXT NOT NULL,
    line     TEXT NOT NULL,
    time     TEXT NOT NULL,
    PRIMARY KEY (trace_id, source, seq)
);

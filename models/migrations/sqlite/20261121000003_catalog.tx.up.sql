-- The catalog: environments (registries) with their builds and the scenarios each build declares,
-- and versioned tasks. A task row is the stable identity (name, external id, review state); every
-- change to its content makes a new immutable task_versions row, which is what rollouts run.
CREATE TABLE registries (
    id              TEXT PRIMARY KEY,
    team_id         TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    project_id      TEXT REFERENCES projects (id) ON DELETE SET NULL,
    name            TEXT NOT NULL,
    registry_type   TEXT NOT NULL DEFAULT 'mcp',
    public          INTEGER NOT NULL DEFAULT 0,
    description     TEXT NOT NULL DEFAULT '',
    branch          TEXT NOT NULL DEFAULT '',
    build_args      TEXT NOT NULL DEFAULT '{}',
    entry_folder    TEXT NOT NULL DEFAULT '',
    repo_url        TEXT NOT NULL DEFAULT '',
    latest_build_id TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (team_id, name)
);
--bun:split
CREATE INDEX registries_project_id_idx ON registries (project_id);
--bun:split
CREATE TABLE registry_stars (
    registry_id TEXT NOT NULL REFERENCES registries (id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (registry_id, user_id)
);
--bun:split
CREATE TABLE builds (
    id                  TEXT PRIMARY KEY,
    registry_id         TEXT NOT NULL REFERENCES registries (id) ON DELETE CASCADE,
    team_id             TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    version             INTEGER NOT NULL,
    status              TEXT NOT NULL,
    source_index_status TEXT NOT NULL DEFAULT 'pending',
    branch              TEXT NOT NULL DEFAULT '',
    digest              TEXT NOT NULL DEFAULT '',
    duration_seconds    REAL,
    error_message       TEXT NOT NULL DEFAULT '',
    repo_url            TEXT NOT NULL DEFAULT '',
    image_name          TEXT NOT NULL DEFAULT '',
    source_key          TEXT NOT NULL DEFAULT '',
    lock                TEXT NOT NULL DEFAULT '{}',
    runtime_config      TEXT NOT NULL DEFAULT '{}',
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    UNIQUE (registry_id, version)
);
--bun:split
CREATE TABLE scenarios (
    id                  TEXT PRIMARY KEY,
    registry_id         TEXT NOT NULL REFERENCES registries (id) ON DELETE CASCADE,
    build_id            TEXT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    name                TEXT NOT NULL,
    slug                TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    setup_description   TEXT NOT NULL DEFAULT '',
    args_schema         TEXT NOT NULL DEFAULT '{}',
    arguments           TEXT NOT NULL DEFAULT '[]',
    metadata            TEXT NOT NULL DEFAULT '{}',
    trace_name_template TEXT NOT NULL DEFAULT '',
    created_at          TEXT NOT NULL,
    UNIQUE (build_id, name)
);
--bun:split
ALTER TABLE tasksets ADD COLUMN stages TEXT NOT NULL DEFAULT '[]';
--bun:split
ALTER TABLE tasksets ADD COLUMN requirements TEXT;
--bun:split
ALTER TABLE tasksets ADD COLUMN requirements_version INTEGER NOT NULL DEFAULT 0;
--bun:split
ALTER TABLE tasks ADD COLUMN external_id TEXT;
--bun:split
ALTER TABLE tasks ADD COLUMN status TEXT NOT NULL DEFAULT 'pending';
--bun:split
ALTER TABLE tasks ADD COLUMN stage TEXT;
--bun:split
ALTER TABLE tasks ADD COLUMN latest_version_id TEXT;
--bun:split
ALTER TABLE tasks ADD COLUMN version_count INTEGER NOT NULL DEFAULT 0;
--bun:split
CREATE UNIQUE INDEX tasks_taskset_name_idx ON tasks (taskset_id, name);
--bun:split
CREATE UNIQUE INDEX tasks_taskset_external_id_idx ON tasks (taskset_id, external_id);
--bun:split
CREATE TABLE task_versions (
    id             TEXT PRIMARY KEY,
    task_id        TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    taskset_id     TEXT NOT NULL REFERENCES tasksets (id) ON DELETE CASCADE,
    team_id        TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    version        INTEGER NOT NULL,
    name           TEXT NOT NULL,
    description    TEXT NOT NULL DEFAULT '',
    env            TEXT NOT NULL DEFAULT '',
    registry_id    TEXT REFERENCES registries (id) ON DELETE SET NULL,
    scenario       TEXT NOT NULL DEFAULT '',
    scenario_id    TEXT REFERENCES scenarios (id) ON DELETE SET NULL,
    args           TEXT NOT NULL DEFAULT '{}',
    prompt         TEXT NOT NULL DEFAULT '',
    system_prompt  TEXT NOT NULL DEFAULT '',
    agent_config   TEXT NOT NULL DEFAULT '{}',
    runtime_config TEXT NOT NULL DEFAULT '{}',
    validation     TEXT NOT NULL DEFAULT '[]',
    content_hash   TEXT NOT NULL,
    created_by     TEXT REFERENCES users (id) ON DELETE SET NULL,
    created_at     TEXT NOT NULL,
    UNIQUE (task_id, version)
);

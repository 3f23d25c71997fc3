-- The catalog: environments (registries) with their builds and the scenarios each build declares,
-- and versioned tasks. A task row is the stable identity (name, external id, review state); every
-- change to its content makes a new immutable task_versions row, which is what rollouts run.
CREATE TABLE registries (
    id              UUID PRIMARY KEY,
    team_id         UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    project_id      UUID REFERENCES projects (id) ON DELETE SET NULL,
    name            TEXT NOT NULL,
    registry_type   TEXT NOT NULL DEFAULT 'mcp',
    public          BOOLEAN NOT NULL DEFAULT FALSE,
    description     TEXT NOT NULL DEFAULT '',
    branch          TEXT NOT NULL DEFAULT '',
    build_args      JSONB NOT NULL DEFAULT '{}',
    entry_folder    TEXT NOT NULL DEFAULT '',
    repo_url        TEXT NOT NULL DEFAULT '',
    latest_build_id UUID,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    UNIQUE (team_id, name)
);
--bun:split
CREATE INDEX registries_project_id_idx ON registries (project_id);
--bun:split
CREATE TABLE registry_stars (
    registry_id UUID NOT NULL REFERENCES registries (id) ON DELETE CASCADE,
    user_id     UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (registry_id, user_id)
);
--bun:split
CREATE TABLE builds (
    id                  UUID PRIMARY KEY,
    registry_id         UUID NOT NULL REFERENCES registries (id) ON DELETE CASCADE,
    team_id             UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    version             INTEGER NOT NULL,
    status              TEXT NOT NULL,
    source_index_status TEXT NOT NULL DEFAULT 'pending',
    branch              TEXT NOT NULL DEFAULT '',
    digest              TEXT NOT NULL DEFAULT '',
    duration_seconds    DOUBLE PRECISION,
    error_message       TEXT NOT NULL DEFAULT '',
    repo_url            TEXT NOT NULL DEFAULT '',
    image_name          TEXT NOT NULL DEFAULT '',
    source_key          TEXT NOT NULL DEFAULT '',
    lock                JSONB NOT NULL DEFAULT '{}',
    runtime_config      JSONB NOT NULL DEFAULT '{}',
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    UNIQUE (registry_id, version)
);
--bun:split
CREATE TABLE scenarios (
    id                  UUID PRIMARY KEY,
    registry_id         UUID NOT NULL REFERENCES registries (id) ON DELETE CASCADE,
    build_id            UUID NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    name                TEXT NOT NULL,
    slug                TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    setup_description   TEXT NOT NULL DEFAULT '',
    args_schema         JSONB NOT NULL DEFAULT '{}',
    arguments           JSONB NOT NULL DEFAULT '[]',
    metadata            JSONB NOT NULL DEFAULT '{}',
    trace_name_template TEXT NOT NULL DEFAULT '',
    created_at          TIMESTAMPTZ NOT NULL,
    UNIQUE (build_id, name)
);
--bun:split
ALTER TABLE tasksets ADD COLUMN stages JSONB NOT NULL DEFAULT '[]';
--bun:split
ALTER TABLE tasksets ADD COLUMN requirements JSONB;
--bun:split
ALTER TABLE tasksets ADD COLUMN requirements_version INTEGER NOT NULL DEFAULT 0;
--bun:split
ALTER TABLE tasks ADD COLUMN external_id TEXT;
--bun:split
ALTER TABLE tasks ADD COLUMN status TEXT NOT NULL DEFAULT 'pending';
--bun:split
ALTER TABLE tasks ADD COLUMN stage TEXT;
--bun:split
ALTER TABLE tasks ADD COLUMN latest_version_id UUID;
--bun:split
ALTER TABLE tasks ADD COLUMN version_count INTEGER NOT NULL DEFAULT 0;
--bun:split
CREATE UNIQUE INDEX tasks_taskset_name_idx ON tasks (taskset_id, name);
--bun:split
CREATE UNIQUE INDEX tasks_taskset_external_id_idx ON tasks (taskset_id, external_id);
--bun:split
CREATE TABLE task_versions (
    id             UUID PRIMARY KEY,
    task_id        UUID NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    taskset_id     UUID NOT NULL REFERENCES tasksets (id) ON DELETE CASCADE,
    team_id        UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    version        INTEGER NOT NULL,
    name           TEXT NOT NULL,
    description    TEXT NOT NULL DEFAULT '',
    env            TEXT NOT NULL DEFAULT '',
    registry_id    UUID REFERENCES registries (id) ON DELETE SET NULL,
    scenario       TEXT NOT NULL DEFAULT '',
    scenario_id    UUID REFERENCES scenarios (id) ON DELETE SET NULL,
    args           JSONB NOT NULL DEFAULT '{}',
    prompt         TEXT NOT NULL DEFAULT '',
    system_prompt  TEXT NOT NULL DEFAULT '',
    agent_config   JSONB NOT NULL DEFAULT '{}',
    runtime_config JSONB NOT NULL DEFAULT '{}',
    validation     JSONB NOT NULL DEFAULT '[]',
    content_hash   TEXT NOT NULL,
    created_by     UUID REFERENCES users (id) ON DELETE SET NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    UNIQUE (task_id, version)
);

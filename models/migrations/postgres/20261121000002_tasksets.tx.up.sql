-- Tasksets with the stars and shares that the list route's visibility and sort keys need, and the
-- task rows they count. The catalog work adds task versions and review state on top.
CREATE TABLE tasksets (
    id                     UUID PRIMARY KEY,
    team_id                UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    name                   TEXT NOT NULL,
    description            TEXT NOT NULL DEFAULT '',
    public                 BOOLEAN NOT NULL DEFAULT FALSE,
    columns                JSONB NOT NULL DEFAULT '{}',
    hidden_progress_stages JSONB NOT NULL DEFAULT '[]',
    created_by             UUID REFERENCES users (id) ON DELETE SET NULL,
    created_at             TIMESTAMPTZ NOT NULL,
    updated_at             TIMESTAMPTZ NOT NULL,
    UNIQUE (team_id, name)
);
--bun:split
CREATE INDEX tasksets_public_idx ON tasksets (public) WHERE public;
--bun:split
CREATE TABLE taskset_stars (
    taskset_id UUID NOT NULL REFERENCES tasksets (id) ON DELETE CASCADE,
    user_id    UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (taskset_id, user_id)
);
--bun:split
CREATE TABLE taskset_shares (
    taskset_id UUID NOT NULL REFERENCES tasksets (id) ON DELETE CASCADE,
    team_id    UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    can_edit   BOOLEAN NOT NULL DEFAULT FALSE,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (taskset_id, team_id)
);
--bun:split
CREATE INDEX taskset_shares_team_id_idx ON taskset_shares (team_id);
--bun:split
CREATE TABLE tasks (
    id         UUID PRIMARY KEY,
    team_id    UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    taskset_id UUID NOT NULL REFERENCES tasksets (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
--bun:split
CREATE INDEX tasks_taskset_id_idx ON tasks (taskset_id);

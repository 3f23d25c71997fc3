-- A member's removal never deletes what they made for the team: a team-scope data file and a
-- taskset's staged upload keep their row and bytes, and their creator becomes NULL ("a former
-- member"). Member-scope files are deleted, bytes first, by Store.RemoveMember itself.
-- SQLite cannot alter a foreign key: each table is rebuilt (nothing references either).
CREATE TABLE data_files_new (
    id             TEXT PRIMARY KEY,
    team_id        TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    membership_id  INTEGER REFERENCES memberships (id) ON DELETE SET NULL,
    scope          TEXT NOT NULL,
    group_name     TEXT NOT NULL DEFAULT '',
    name           TEXT NOT NULL,
    status         TEXT NOT NULL,
    declared_bytes INTEGER NOT NULL,
    size_bytes     INTEGER NOT NULL DEFAULT 0,
    content_type   TEXT NOT NULL DEFAULT '',
    object_key     TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    completed_at   TEXT
);
--bun:split
INSERT INTO data_files_new (id, team_id, membership_id, scope, group_name, name, status, declared_bytes, size_bytes,
    content_type, object_key, created_at, updated_at, completed_at)
SELECT id, team_id, membership_id, scope, group_name, name, status, declared_bytes, size_bytes,
    content_type, object_key, created_at, updated_at, completed_at FROM data_files;
--bun:split
DROP TABLE data_files;
--bun:split
ALTER TABLE data_files_new RENAME TO data_files;
--bun:split
CREATE INDEX data_files_team_idx ON data_files (team_id, scope, created_at);
--bun:split
CREATE INDEX data_files_member_idx ON data_files (membership_id, created_at);
--bun:split
CREATE TABLE uploads_new (
    id            TEXT PRIMARY KEY,
    team_id       TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    taskset_id    TEXT NOT NULL REFERENCES tasksets (id) ON DELETE CASCADE,
    membership_id INTEGER REFERENCES memberships (id) ON DELETE SET NULL,
    name          TEXT NOT NULL,
    content_type  TEXT NOT NULL,
    size_bytes    INTEGER NOT NULL,
    sha256        TEXT NOT NULL DEFAULT '',
    mode          TEXT NOT NULL,
    part_bytes    INTEGER NOT NULL,
    part_count    INTEGER NOT NULL,
    status        TEXT NOT NULL,
    error         TEXT NOT NULL DEFAULT '',
    object_key    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    staged_at     TEXT
);
--bun:split
INSERT INTO uploads_new (id, team_id, taskset_id, membership_id, name, content_type, size_bytes, sha256, mode, part_bytes,
    part_count, status, error, object_key, created_at, staged_at)
SELECT id, team_id, taskset_id, membership_id, name, content_type, size_bytes, sha256, mode, part_bytes,
    part_count, status, error, object_key, created_at, staged_at FROM uploads;
--bun:split
DROP TABLE uploads;
--bun:split
ALTER TABLE uploads_new RENAME TO uploads;
--bun:split
CREATE INDEX uploads_taskset_idx ON uploads (taskset_id, created_at);

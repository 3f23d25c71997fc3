-- Data files: a team's file store. A file is reserved (pending, with the size the client
-- declared), uploaded straight to object storage through a presigned PUT, then completed (ready,
-- with the size and type read from the stored object). Member files are readable by their owner
-- only; team files by every member.
CREATE TABLE data_files (
    id             TEXT PRIMARY KEY,
    team_id        TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    membership_id  INTEGER NOT NULL REFERENCES memberships (id) ON DELETE CASCADE,
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
CREATE INDEX data_files_team_idx ON data_files (team_id, scope, created_at);
--bun:split
CREATE INDEX data_files_member_idx ON data_files (membership_id, created_at);

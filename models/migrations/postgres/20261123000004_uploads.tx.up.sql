-- Uploads: files staged for a taskset's task briefs. Single-part uploads are one presigned PUT;
-- multipart ones a presigned PUT per part, joined at complete. Complete verifies the size and,
-- when one was declared, the SHA-256 of the joined bytes.
CREATE TABLE uploads (
    id            UUID PRIMARY KEY,
    team_id       UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    taskset_id    UUID NOT NULL REFERENCES tasksets (id) ON DELETE CASCADE,
    membership_id BIGINT NOT NULL REFERENCES memberships (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    content_type  TEXT NOT NULL,
    size_bytes    BIGINT NOT NULL,
    sha256        TEXT NOT NULL DEFAULT '',
    mode          TEXT NOT NULL,
    part_bytes    BIGINT NOT NULL,
    part_count    INTEGER NOT NULL,
    status        TEXT NOT NULL,
    error         TEXT NOT NULL DEFAULT '',
    object_key    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    staged_at     TIMESTAMPTZ
);
--bun:split
CREATE INDEX uploads_taskset_idx ON uploads (taskset_id, created_at);

-- Builds from uploaded source: the upload a client reserves before it triggers a build, what
-- the trigger asked for, the image the build made (an OCI archive in object storage) and the
-- build's log.
CREATE TABLE build_uploads (
    id         UUID PRIMARY KEY,
    team_id    UUID NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    created_by UUID,
    source_key TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    used_at    TIMESTAMPTZ
);
--bun:split
ALTER TABLE builds ADD COLUMN options JSONB NOT NULL DEFAULT '{}';
--bun:split
ALTER TABLE builds ADD COLUMN image_key TEXT NOT NULL DEFAULT '';
--bun:split
ALTER TABLE builds ADD COLUMN created_by UUID;
--bun:split
CREATE INDEX builds_registry_id_created_at_idx ON builds (registry_id, created_at);
--bun:split
CREATE TABLE build_logs (
    build_id UUID NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    seq      INTEGER NOT NULL,
    line     TEXT NOT NULL,
    time     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (build_id, seq)
);

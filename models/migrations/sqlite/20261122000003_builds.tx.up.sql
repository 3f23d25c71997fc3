-- Builds from uploaded source: the upload a client reserves before it triggers a build, what
-- the trigger asked for, the image the build made (an OCI archive in object storage) and the
-- build's log.
CREATE TABLE build_uploads (
    id         TEXT PRIMARY KEY,
    team_id    TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    created_by TEXT,
    source_key TEXT NOT NULL,
    created_at TEXT NOT NULL,
    used_at    TEXT
);
--bun:split
ALTER TABLE builds ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
--bun:split
ALTER TABLE builds ADD COLUMN image_key TEXT NOT NULL DEFAULT '';
--bun:split
ALTER TABLE builds ADD COLUMN created_by TEXT;
--bun:split
CREATE INDEX builds_registry_id_created_at_idx ON builds (registry_id, created_at);
--bun:split
CREATE TABLE build_logs (
    build_id TEXT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    seq      INTEGER NOT NULL,
    line     TEXT NOT NULL,
    time     TEXT NOT NULL,
    PRIMARY KEY (build_id, seq)
);

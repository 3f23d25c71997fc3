-- Review of tasks: state changes (status and stage moves) as an append-only log, comments, and
-- the notifications that @mentions in comments send.
CREATE TABLE task_events (
    id         TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    team_id    TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,
    from_value TEXT NOT NULL DEFAULT '',
    to_value   TEXT NOT NULL DEFAULT '',
    version    INTEGER NOT NULL DEFAULT 0,
    user_id    TEXT REFERENCES users (id) ON DELETE SET NULL,
    created_at TEXT NOT NULL
);
--bun:split
CREATE INDEX task_events_task_idx ON task_events (task_id, created_at);
--bun:split
CREATE TABLE task_comments (
    id         TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    message    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
--bun:split
CREATE INDEX task_comments_task_idx ON task_comments (task_id, created_at);
--bun:split
CREATE TABLE notifications (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,
    task_id    TEXT REFERENCES tasks (id) ON DELETE CASCADE,
    comment_id TEXT REFERENCES task_comments (id) ON DELETE CASCADE,
    actor_id   TEXT REFERENCES users (id) ON DELETE SET NULL,
    read_at    TEXT,
    created_at TEXT NOT NULL
);
--bun:split
CREATE INDEX notifications_user_idx ON notifications (user_id, created_at);
--bun:split
CREATE INDEX task_versions_task_idx ON task_versions (task_id, version);

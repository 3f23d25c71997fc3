-- A regression replay of an environment build against a finished job: each scored attempt of
-- the job run again on the build, its model's recorded answers replayed in order, as one job;
-- each replay compared with the attempt it replays once the job has ended.
CREATE TABLE build_replay_checks (
    id             TEXT PRIMARY KEY,
    team_id        TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    build_id       TEXT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    against_job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    job_id         TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    status         TEXT NOT NULL,
    attempts       TEXT NOT NULL DEFAULT '[]',
    not_replayed   TEXT NOT NULL DEFAULT '[]',
    created_at     TEXT NOT NULL,
    finished_at    TEXT
);
--bun:split
CREATE INDEX build_replay_checks_build_idx ON build_replay_checks (build_id, created_at);
--bun:split
-- The attempt whose recorded model answers an attempt replays (the replay model's).
ALTER TABLE traces ADD COLUMN replay_of TEXT REFERENCES traces (id) ON DELETE SET NULL;

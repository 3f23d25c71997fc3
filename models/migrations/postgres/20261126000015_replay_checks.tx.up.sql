-- A regression replay of an environment build against a finished job: each scored attempt of
-- the job run again on the build, its model's recorded answers replayed in order, as one job;
-- each replay compared with the attempt it replays once the job has ended.
CREATE TABLE build_replay_checks (
    id             uuid PRIMARY KEY,
    team_id        uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    build_id       uuid NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    against_job_id uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    job_id         uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    status         TEXT NOT NULL,
    attempts       JSONB NOT NULL DEFAULT '[]',
    not_replayed   JSONB NOT NULL DEFAULT '[]',
    created_at     TIMESTAMPTZ NOT NULL,
    finished_at    TIMESTAMPTZ
);
--bun:split
CREATE INDEX build_replay_checks_build_idx ON build_replay_checks (build_id, created_at);
--bun:split
-- The attempt whose recorded model answers an attempt replays (the replay model's).
ALTER TABLE traces ADD COLUMN replay_of uuid REFERENCES traces (id) ON DELETE SET NULL;

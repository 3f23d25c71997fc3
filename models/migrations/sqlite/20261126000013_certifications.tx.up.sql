-- A certification of an environment build: every task of a taskset on that build replayed by
-- the oracle k times, and once by an agent that does nothing, as one job; the figures per task
-- once the job has ended.
CREATE TABLE build_certifications (
    id           TEXT PRIMARY KEY,
    team_id      TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    build_id     TEXT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    job_id       TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    taskset_id   TEXT REFERENCES tasksets (id) ON DELETE SET NULL,
    k            INTEGER NOT NULL,
    status       TEXT NOT NULL,
    tasks        TEXT NOT NULL DEFAULT '[]',
    created_at   TEXT NOT NULL,
    finished_at  TEXT
);
--bun:split
CREATE INDEX build_certifications_build_idx ON build_certifications (build_id, created_at);
--bun:split
-- An environment may require a passed certification of a build before it becomes the latest.
ALTER TABLE registries ADD COLUMN certify_before_latest INTEGER NOT NULL DEFAULT 0;

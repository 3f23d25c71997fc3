-- Each attempt of a job gets the next number of its job's finish sequence once it has ended: the
-- order of the job's stream of finished attempts, which a client resumes from the last number it
-- read. NULL until it is numbered; jobs.finish_seq is the last number given.
ALTER TABLE traces ADD COLUMN finish_seq bigint;
--bun:split
ALTER TABLE jobs ADD COLUMN finish_seq bigint NOT NULL DEFAULT 0;
--bun:split
CREATE UNIQUE INDEX traces_job_finish_seq_idx ON traces (job_id, finish_seq) WHERE finish_seq IS NOT NULL;

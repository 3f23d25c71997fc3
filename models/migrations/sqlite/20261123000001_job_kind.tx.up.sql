-- How a job was launched: single (POST /v2/rollouts/run), remote (POST /v2/rollouts/submit, an
-- SDK's attempt) or batch (run_list). Job cards show it as job_type.
ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'batch';
--bun:split
CREATE INDEX jobs_taskset_idx ON jobs (team_id, taskset_id, created_at);

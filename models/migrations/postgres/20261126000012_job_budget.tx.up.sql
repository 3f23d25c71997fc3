-- A run_list job may have a ceiling on what it spends (max_cost_usd): admission stops, and its
-- attempts stop at their next model call, once its spend reaches it. The spend is kept beside the
-- job as two running sums, each added to in the transaction that records what it sums (a model
-- call's row, an instance's end), so that checking it at every model call reads one row.
ALTER TABLE jobs ADD COLUMN max_cost_usd DOUBLE PRECISION;
--bun:split
ALTER TABLE jobs ADD COLUMN spent_inference_usd DOUBLE PRECISION NOT NULL DEFAULT 0;
--bun:split
ALTER TABLE jobs ADD COLUMN spent_environment_usd DOUBLE PRECISION NOT NULL DEFAULT 0;
--bun:split
UPDATE jobs SET spent_inference_usd = (SELECT COALESCE(SUM(il.cost), 0) FROM inference_logs AS il
    JOIN traces AS t ON t.id = il.trace_id WHERE t.job_id = jobs.id);
--bun:split
UPDATE jobs SET spent_environment_usd = (SELECT COALESCE(SUM(cost), 0) FROM instances
    WHERE instances.job_id = jobs.id AND status <> 'running');
--bun:split
-- The running instances of one job, priced up to now at each check.
CREATE INDEX instances_job_running_idx ON instances (job_id) WHERE status = 'running';

-- An attempt that ended in error because the infrastructure failed it (no host took it, its
-- sandbox was lost on every try) says so: nothing of it was the agent's, and it may be run again.
ALTER TABLE traces ADD COLUMN infra_failure INTEGER NOT NULL DEFAULT 0;
--bun:split
-- An attempt that runs a failed one of its job again names it (proctor jobs retry); the failed
-- one is then invalid, and is never retried twice.
ALTER TABLE traces ADD COLUMN retry_of TEXT REFERENCES traces (id) ON DELETE SET NULL;
--bun:split
CREATE UNIQUE INDEX traces_retry_of_idx ON traces (retry_of) WHERE retry_of IS NOT NULL;

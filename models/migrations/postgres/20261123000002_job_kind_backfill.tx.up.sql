-- Jobs launched before jobs.kind took their kind from metadata.kind (run_list, else a single run);
-- metadata is the user's again.
UPDATE jobs SET kind = CASE WHEN metadata->>'kind' = 'run_list' THEN 'batch' ELSE 'single' END, metadata = metadata - 'kind'
WHERE metadata->>'kind' IS NOT NULL OR kind = 'batch';

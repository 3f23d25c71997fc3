-- A certification records how long its attempts' environments took from the try's start (the
-- sandbox asked for) to the environment answering MCP (its tools listed): p50 and p99, in ms.
ALTER TABLE build_certifications ADD COLUMN startup_samples INTEGER NOT NULL DEFAULT 0;
--bun:split
ALTER TABLE build_certifications ADD COLUMN startup_p50_ms REAL;
--bun:split
ALTER TABLE build_certifications ADD COLUMN startup_p99_ms REAL;

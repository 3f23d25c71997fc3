-- The sandbox provider that ran an instance (process, container, kubernetes): a certification's
-- start-up figures are split by it.
ALTER TABLE instances ADD COLUMN sandbox_provider TEXT NOT NULL DEFAULT '';
--bun:split
-- A certification's start-up figures per sandbox provider, beside the figures over all of them.
ALTER TABLE build_certifications ADD COLUMN startup_by_provider TEXT NOT NULL DEFAULT '[]';
--bun:split
-- The digest of the build a certification or a replay check ran on, as it recorded it.
ALTER TABLE build_certifications ADD COLUMN build_digest TEXT NOT NULL DEFAULT '';
--bun:split
ALTER TABLE build_replay_checks ADD COLUMN build_digest TEXT NOT NULL DEFAULT '';

-- A mention is mailed once: mailed_at records that its mail went out, and the mail check sends
-- those still without one, oldest first.
ALTER TABLE notifications ADD COLUMN mailed_at TEXT;
--bun:split
CREATE INDEX notifications_unmailed_idx ON notifications (created_at) WHERE mailed_at IS NULL;

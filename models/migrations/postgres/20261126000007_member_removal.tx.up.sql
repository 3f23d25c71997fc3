-- A member's removal never deletes what they made for the team: a team-scope data file and a
-- taskset's staged upload keep their row and bytes, and their creator becomes NULL ("a former
-- member"). Member-scope files are deleted, bytes first, by Store.RemoveMember itself.
ALTER TABLE data_files ALTER COLUMN membership_id DROP NOT NULL;
--bun:split
ALTER TABLE data_files DROP CONSTRAINT data_files_membership_id_fkey;
--bun:split
ALTER TABLE data_files ADD CONSTRAINT data_files_membership_id_fkey
    FOREIGN KEY (membership_id) REFERENCES memberships (id) ON DELETE SET NULL;
--bun:split
ALTER TABLE uploads ALTER COLUMN membership_id DROP NOT NULL;
--bun:split
ALTER TABLE uploads DROP CONSTRAINT uploads_membership_id_fkey;
--bun:split
ALTER TABLE uploads ADD CONSTRAINT uploads_membership_id_fkey
    FOREIGN KEY (membership_id) REFERENCES memberships (id) ON DELETE SET NULL;

-- A task version's keywords and metadata (a Proctor extension of upload and export: a Harbor
-- task's [task] keywords, authors, [metadata] and source). Part of the version's content: a change
-- makes a new version. The listing of a taskset's tasks searches the keywords of each task's
-- latest version (json_each).
ALTER TABLE task_versions ADD COLUMN keywords TEXT NOT NULL DEFAULT '[]';
--bun:split
ALTER TABLE task_versions ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';

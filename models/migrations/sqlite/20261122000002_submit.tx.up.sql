-- What an attempt runs with when its launch overrode the task version's: the scenario's
-- arguments and the agent config, each merged over the version's (NULL: the version's own).
ALTER TABLE traces ADD COLUMN scenario_args TEXT;
--bun:split
ALTER TABLE traces ADD COLUMN agent_config TEXT;
--bun:split
-- A submit names its task by external id or name, across the tasksets the caller sees.
CREATE INDEX tasks_name_idx ON tasks (name);
--bun:split
CREATE INDEX tasks_external_id_idx ON tasks (external_id);

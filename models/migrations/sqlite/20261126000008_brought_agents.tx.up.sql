-- A brought agent is a registry of registry_type 'agent', built like an environment; an attempt
-- that runs one names the agent's build it was launched with (NULL: the built-in agent loop).
ALTER TABLE traces ADD COLUMN agent_build_id TEXT REFERENCES builds (id) ON DELETE SET NULL;
--bun:split
CREATE INDEX traces_agent_build_idx ON traces (agent_build_id) WHERE agent_build_id IS NOT NULL;

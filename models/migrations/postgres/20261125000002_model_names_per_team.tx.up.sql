-- Model names are unique per owner, not across the platform (issue 29): a team's model_name is
-- unique within the team, and a platform model's (no team) among platform models. A global index
-- let one team learn another's private names from a 409 and take a name first to block its owner.
-- The old index held every name once, so both new ones hold on the existing rows.
DROP INDEX llm_models_name_idx;
--bun:split
CREATE UNIQUE INDEX llm_models_platform_name_idx ON llm_models (model_name) WHERE team_id IS NULL;
--bun:split
CREATE UNIQUE INDEX llm_models_team_name_idx ON llm_models (team_id, model_name);

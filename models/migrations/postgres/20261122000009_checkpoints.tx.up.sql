-- Trainable models, their forks and checkpoints. Training happens outside the platform: a trainer
-- registers each checkpoint with the upstream model name that serves it; the head checkpoint is
-- what the gateway calls for the model.
ALTER TABLE llm_models ADD COLUMN trainable BOOLEAN NOT NULL DEFAULT FALSE;
--bun:split
ALTER TABLE llm_models ADD COLUMN fork_of_model_id UUID REFERENCES llm_models (id) ON DELETE SET NULL;
--bun:split
ALTER TABLE llm_models ADD COLUMN head_checkpoint_id UUID;
--bun:split
CREATE TABLE model_checkpoints (
    id              UUID PRIMARY KEY,
    model_id        UUID NOT NULL REFERENCES llm_models (id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    upstream_model  TEXT NOT NULL,
    learning_rate   DOUBLE PRECISION,
    loss_fn         TEXT NOT NULL DEFAULT '',
    metrics         JSONB NOT NULL DEFAULT '{}',
    num_datums      INTEGER NOT NULL DEFAULT 0,
    num_tokens      BIGINT NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ NOT NULL,
    UNIQUE (model_id, name)
);
--bun:split
ALTER TABLE inference_logs ADD COLUMN checkpoint_id UUID;
--bun:split
CREATE INDEX inference_logs_checkpoint_idx ON inference_logs (checkpoint_id);

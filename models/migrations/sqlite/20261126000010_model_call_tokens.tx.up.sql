-- A training policy's model calls are asked for token ids and logprobs, and what the upstream
-- returned is kept beside the assistant event it answered, verbatim (text, not a JSON type that
-- would re-encode it): the exact tokens a trainer trains on. The event names its call (its data's
-- tokens_ref is call_id): a row whose call wrote no event (a retried step's) is never matched.
ALTER TABLE llm_models ADD COLUMN training_policy INTEGER NOT NULL DEFAULT 0;
--bun:split
CREATE TABLE model_call_tokens (
    trace_id TEXT NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    call_id TEXT NOT NULL,
    prompt_token_ids TEXT,
    completion_token_ids TEXT,
    logprobs TEXT,
    sampling TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (trace_id, call_id)
);

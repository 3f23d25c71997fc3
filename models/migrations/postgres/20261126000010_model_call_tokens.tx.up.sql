-- A training policy's model calls are asked for token ids and logprobs, and what the upstream
-- returned is kept beside the assistant event it answered, verbatim (text, not a JSON type that
-- would re-encode it): the exact tokens a trainer trains on. The event names its call (its data's
-- tokens_ref is call_id): a row whose call wrote no event (a retried step's) is never matched.
ALTER TABLE llm_models ADD COLUMN training_policy BOOLEAN NOT NULL DEFAULT FALSE;
--bun:split
CREATE TABLE model_call_tokens (
    trace_id uuid NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    call_id uuid NOT NULL,
    prompt_token_ids text,
    completion_token_ids text,
    logprobs text,
    sampling text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (trace_id, call_id)
);

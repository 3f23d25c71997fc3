-- A session signed in with an API key ends with the key: revoking (or deleting) the key
-- removes its sessions. Sessions made by an administrator have no key.
ALTER TABLE sessions ADD COLUMN api_key_id TEXT REFERENCES api_keys (id) ON DELETE CASCADE;
--bun:split
CREATE INDEX sessions_api_key_id_idx ON sessions (api_key_id);
--bun:split
CREATE INDEX sessions_expires_at_idx ON sessions (expires_at);

-- Queues with a pause switch, API tokens, and the index the dashboard's stats read.
-- Instants are integer microseconds since the Unix epoch, UTC.

-- A queue gets a row when it is first paused, and a queue without a row is not paused.
-- Claims (occurrence_candidates, occurrence_next_due) skip occurrences of a paused queue.
CREATE TABLE IF NOT EXISTS queues (
    name       TEXT PRIMARY KEY,
    paused     INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- API tokens: only the SHA-256 of the secret is stored, and the secret is shown once.
CREATE TABLE IF NOT EXISTS api_tokens (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    scope        TEXT NOT NULL,            -- read | write | admin
    token_hash   TEXT NOT NULL,            -- hex SHA-256 of the whole token
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS api_tokens_hash ON api_tokens (token_hash);
CREATE UNIQUE INDEX IF NOT EXISTS api_tokens_name ON api_tokens (name) WHERE revoked_at IS NULL;

-- Throughput and lateness per minute over the last hour read attempts by their finish time.
CREATE INDEX IF NOT EXISTS attempts_finished ON attempts (finished_at) WHERE finished_at IS NOT NULL;

-- What the REST API, the dashboard, /metrics and secrets need: queues with a pause switch,
-- API tokens, encrypted secrets, and the index the dashboard's stats read.
-- Instants are timestamptz; every session runs with TimeZone = UTC.

-- A queue gets a row when it is first paused or resumed; a queue without a row is not paused.
-- Claims (occurrence_candidates, occurrence_next_due) skip occurrences of a paused queue.
CREATE TABLE queues (
    name       text PRIMARY KEY,
    paused     boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL
);

-- API tokens: only the SHA-256 of the secret is stored, and the secret is shown once.
CREATE TABLE api_tokens (
    id           text PRIMARY KEY,
    name         text NOT NULL,
    scope        text NOT NULL,            -- read | write | admin
    token_hash   text NOT NULL,            -- hex SHA-256 of the whole token
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE UNIQUE INDEX api_tokens_hash ON api_tokens (token_hash);
CREATE UNIQUE INDEX api_tokens_name ON api_tokens (name) WHERE revoked_at IS NULL;

-- Secrets jobs refer to as {"$secret": "name"}. value is the Fernet token (encrypted with
-- TICKWORK_SECRET_KEY), never the plaintext.
CREATE TABLE secrets (
    name       text PRIMARY KEY,
    value      bytea NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Throughput and lateness per minute over the last hour read attempts by their finish time.
-- Made on the partitioned parent, so every partition (existing and future) gets one.
CREATE INDEX attempts_finished ON attempts (finished_at) WHERE finished_at IS NOT NULL;

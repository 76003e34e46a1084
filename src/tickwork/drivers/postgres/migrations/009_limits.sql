-- Limits across every worker (docs/limits.md, drivers/limits.py).
-- A queue's limits sit on its row: max_running caps its running attempts (leases not yet
-- expired); rate_count per rate_seconds with burst is a token bucket, whose state is tokens
-- at tokens_at (NULL: full). NULL limits: not limited.
ALTER TABLE queues ADD COLUMN max_running integer;
ALTER TABLE queues ADD COLUMN rate_count integer;
ALTER TABLE queues ADD COLUMN rate_seconds double precision;
ALTER TABLE queues ADD COLUMN burst integer;
ALTER TABLE queues ADD COLUMN tokens double precision;
ALTER TABLE queues ADD COLUMN tokens_at timestamptz;

-- Named rate limits that jobs share through their limit_key, whatever their queue.
CREATE TABLE limit_keys (
    key          text PRIMARY KEY,
    rate_count   integer NOT NULL,
    rate_seconds double precision NOT NULL,
    burst        integer NOT NULL,
    tokens       double precision,
    tokens_at    timestamptz,
    updated_at   timestamptz NOT NULL
);

-- When a limit first held the occurrence back: the catch-up window no longer counts against
-- it, and its start lateness is reported apart.
ALTER TABLE occurrences ADD COLUMN limited_at timestamptz;

-- A limited queue's claim counts its running attempts.
CREATE INDEX occurrences_queue_running ON occurrences (queue) WHERE state = 'running';

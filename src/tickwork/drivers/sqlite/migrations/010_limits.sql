-- Limits across every worker (docs/limits.md, drivers/limits.py).
-- Instants are INTEGER microseconds since the Unix epoch, UTC.
-- A queue's limits sit on its row: max_running caps its running attempts (leases not yet
-- expired); rate_count per rate_seconds with burst is a token bucket, whose state is tokens
-- at tokens_at (NULL: full). NULL limits: not limited.
ALTER TABLE queues ADD COLUMN max_running INTEGER;
ALTER TABLE queues ADD COLUMN rate_count INTEGER;
ALTER TABLE queues ADD COLUMN rate_seconds REAL;
ALTER TABLE queues ADD COLUMN burst INTEGER;
ALTER TABLE queues ADD COLUMN tokens REAL;
ALTER TABLE queues ADD COLUMN tokens_at INTEGER;

-- Named rate limits that jobs share through their limit_key, whatever their queue.
CREATE TABLE limit_keys (
    key          TEXT PRIMARY KEY,
    rate_count   INTEGER NOT NULL,
    rate_seconds REAL NOT NULL,
    burst        INTEGER NOT NULL,
    tokens       REAL,
    tokens_at    INTEGER,
    updated_at   INTEGER NOT NULL
) WITHOUT ROWID;

-- When a limit first held the occurrence back: the catch-up window no longer counts against
-- it, and its start lateness is reported apart.
ALTER TABLE occurrences ADD COLUMN limited_at INTEGER;

-- A limited queue's claim counts its running attempts.
CREATE INDEX occurrences_queue_running ON occurrences (queue) WHERE state = 'running';

-- name: limits_queue
-- A limited queue's limits and bucket (the write transaction makes claims take turns).
SELECT name, max_running, rate_count, rate_seconds, burst, tokens, tokens_at FROM queues
WHERE name = ? AND (max_running IS NOT NULL OR rate_count IS NOT NULL)

-- name: limits_key
SELECT key AS name, NULL AS max_running, rate_count, rate_seconds, burst, tokens, tokens_at
FROM limit_keys WHERE key = ?

-- name: limits_running
-- Running attempts of a queue whose lease has not expired: a crashed worker's slots come back
-- when its leases expire, before the rescuer has looked at them.
SELECT COUNT(*) AS running FROM occurrences
WHERE state = 'running' AND queue = ? AND lease_until > ?

-- name: limits_write_queue
UPDATE queues SET tokens = ?, tokens_at = ? WHERE name = ?

-- name: limits_write_key
UPDATE limit_keys SET tokens = ?, tokens_at = ? WHERE key = ?

-- name: limits_held
UPDATE occurrences SET limited_at = ?
WHERE job_id = ? AND scheduled_at = ? AND limited_at IS NULL

-- name: queue_limits_set
INSERT INTO queues (name, paused, updated_at, max_running, rate_count, rate_seconds, burst)
VALUES (:name, 0, :now, :max_running, :rate_count, :rate_seconds, :burst)
ON CONFLICT (name) DO UPDATE SET
    max_running = excluded.max_running, rate_count = excluded.rate_count,
    rate_seconds = excluded.rate_seconds, burst = excluded.burst, tokens = NULL,
    tokens_at = NULL, updated_at = excluded.updated_at

-- name: key_limit_set
INSERT INTO limit_keys (key, rate_count, rate_seconds, burst, updated_at)
VALUES (:key, :rate_count, :rate_seconds, :burst, :now)
ON CONFLICT (key) DO UPDATE SET
    rate_count = excluded.rate_count, rate_seconds = excluded.rate_seconds,
    burst = excluded.burst, tokens = NULL, tokens_at = NULL, updated_at = excluded.updated_at

-- name: key_limit_list
SELECT key AS name, NULL AS max_running, rate_count, rate_seconds, burst, tokens, tokens_at
FROM limit_keys
ORDER BY key

-- name: key_limit_delete
DELETE FROM limit_keys WHERE key = :key

-- name: namespace_runs_read
-- A namespace's hourly quota and the attempts its claims started in the hour (0: none yet).
SELECT n.max_runs_per_hour, COALESCE(r.runs, 0) AS runs FROM namespaces n
LEFT JOIN namespace_runs r ON r.namespace = n.name AND r.hour = ?
WHERE n.name = ? AND n.max_runs_per_hour IS NOT NULL

-- name: namespace_runs_write
INSERT INTO namespace_runs (namespace, hour, runs) VALUES (?, ?, ?)
ON CONFLICT (namespace, hour) DO UPDATE SET runs = runs + excluded.runs

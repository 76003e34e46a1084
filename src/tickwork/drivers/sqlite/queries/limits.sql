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
-- With set_namespace, the owner too (NULL: shared); without, the owner stays.
INSERT INTO queues (name, paused, updated_at, max_running, rate_count, rate_seconds, burst,
                    namespace)
VALUES (:name, 0, :now, :max_running, :rate_count, :rate_seconds, :burst,
        :namespace)
ON CONFLICT (name) DO UPDATE SET
    max_running = excluded.max_running, rate_count = excluded.rate_count,
    rate_seconds = excluded.rate_seconds, burst = excluded.burst, tokens = NULL,
    tokens_at = NULL, updated_at = excluded.updated_at,
    namespace = CASE WHEN :set_namespace THEN excluded.namespace ELSE queues.namespace END

-- name: key_limit_set
-- With set_namespace, the owner too (NULL: shared); without, the owner stays.
INSERT INTO limit_keys (key, rate_count, rate_seconds, burst, updated_at, namespace)
VALUES (:key, :rate_count, :rate_seconds, :burst, :now, :namespace)
ON CONFLICT (key) DO UPDATE SET
    rate_count = excluded.rate_count, rate_seconds = excluded.rate_seconds,
    burst = excluded.burst, tokens = NULL, tokens_at = NULL, updated_at = excluded.updated_at,
    namespace = CASE WHEN :set_namespace THEN excluded.namespace ELSE limit_keys.namespace END
RETURNING namespace

-- name: key_limit_list
-- With :namespace, the keys other namespaces own are left out.
SELECT key AS name, NULL AS max_running, rate_count, rate_seconds, burst, tokens, tokens_at,
       namespace
FROM limit_keys
WHERE :namespace IS NULL OR namespace IS NULL OR namespace = :namespace
ORDER BY key

-- name: limit_owners
-- The queues and keys a namespace owns (the shared ones, NULL, are most and are not read).
SELECT 'queue' AS kind, name, namespace FROM queues WHERE namespace IS NOT NULL
UNION ALL
SELECT 'key', key, namespace FROM limit_keys WHERE namespace IS NOT NULL

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

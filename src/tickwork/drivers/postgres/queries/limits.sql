-- name: limits_lock_queues
-- The limited queues a claim is about to start runs of, locked in name order (then the keys,
-- in key order: one order for every claimer, so they queue up and never deadlock). Held to
-- commit: no two claimers of a limited queue count its running attempts at once.
SELECT name, max_running, rate_count, rate_seconds, burst, tokens, tokens_at FROM queues
WHERE name = ANY(%(names)b::text[]) AND (max_running IS NOT NULL OR rate_count IS NOT NULL)
ORDER BY name COLLATE "C"
FOR UPDATE

-- name: limits_lock_keys
SELECT key AS name, NULL::integer AS max_running, rate_count, rate_seconds, burst, tokens,
       tokens_at
FROM limit_keys WHERE key = ANY(%(names)b::text[])
ORDER BY key COLLATE "C"
FOR UPDATE

-- name: limits_running
-- Running attempts of these queues whose lease has not expired: a crashed worker's slots come
-- back when its leases expire, before the rescuer has looked at them.
SELECT queue, count(*) AS running FROM occurrences
WHERE state = 'running' AND queue = ANY(%(names)b::text[]) AND lease_until > %(now)s
GROUP BY queue

-- name: limits_write_queues
UPDATE queues q SET tokens = v.tokens, tokens_at = v.at
FROM unnest(%(names)b::text[], %(tokens)b::float8[], %(ats)b::timestamptz[])
     AS v(name, tokens, at)
WHERE q.name = v.name

-- name: limits_write_keys
UPDATE limit_keys k SET tokens = v.tokens, tokens_at = v.at
FROM unnest(%(names)b::text[], %(tokens)b::float8[], %(ats)b::timestamptz[])
     AS v(name, tokens, at)
WHERE k.key = v.name

-- name: limits_held
-- Runs a limit held back: noted once, when it first happened.
UPDATE occurrences o SET limited_at = %(now)s
FROM unnest(%(job_ids)b::text[], %(scheduled)b::timestamptz[]) AS v(job_id, scheduled_at)
WHERE o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at AND o.limited_at IS NULL

-- name: queue_limits_set
-- With set_namespace, the owner too (NULL: shared); without, the owner stays.
INSERT INTO queues (name, paused, updated_at, max_running, rate_count, rate_seconds, burst,
                    namespace)
VALUES (%(name)s, false, %(now)s, %(max_running)s, %(rate_count)s, %(rate_seconds)s, %(burst)s,
        %(namespace)s)
ON CONFLICT (name) DO UPDATE SET
    max_running = excluded.max_running, rate_count = excluded.rate_count,
    rate_seconds = excluded.rate_seconds, burst = excluded.burst, tokens = NULL,
    tokens_at = NULL, updated_at = excluded.updated_at,
    namespace = CASE WHEN %(set_namespace)s THEN excluded.namespace ELSE queues.namespace END

-- name: key_limit_set
-- With set_namespace, the owner too (NULL: shared); without, the owner stays.
INSERT INTO limit_keys (key, rate_count, rate_seconds, burst, updated_at, namespace)
VALUES (%(key)s, %(rate_count)s, %(rate_seconds)s, %(burst)s, %(now)s, %(namespace)s)
ON CONFLICT (key) DO UPDATE SET
    rate_count = excluded.rate_count, rate_seconds = excluded.rate_seconds,
    burst = excluded.burst, tokens = NULL, tokens_at = NULL, updated_at = excluded.updated_at,
    namespace = CASE WHEN %(set_namespace)s THEN excluded.namespace ELSE limit_keys.namespace END
RETURNING namespace

-- name: key_limit_list
-- With a namespace, the keys other namespaces own are left out.
SELECT key AS name, NULL::integer AS max_running, rate_count, rate_seconds, burst, tokens,
       tokens_at, namespace
FROM limit_keys
WHERE %(namespace)s::text IS NULL OR namespace IS NULL OR namespace = %(namespace)s::text
ORDER BY key COLLATE "C"

-- name: limit_owners
-- The queues and keys a namespace owns (the shared ones, NULL, are most and are not read).
SELECT 'queue' AS kind, name, namespace FROM queues WHERE namespace IS NOT NULL
UNION ALL
SELECT 'key', key, namespace FROM limit_keys WHERE namespace IS NOT NULL

-- name: key_limit_delete
DELETE FROM limit_keys WHERE key = %(key)s

-- name: namespace_runs_lock
-- The hourly quotas of the candidates' namespaces, with the attempts started this hour, each
-- hour's row locked in name order after the queue and key rows (one order for every claimer).
-- The no-op update on a row already there locks it and returns its count; a new hour starts
-- at 0.
WITH quota AS (
    SELECT name, max_runs_per_hour FROM namespaces
    WHERE name = ANY(%(names)b::text[]) AND max_runs_per_hour IS NOT NULL
), locked AS (
    INSERT INTO namespace_runs (namespace, hour, runs)
    SELECT name, %(hour)s, 0 FROM quota ORDER BY name COLLATE "C"
    ON CONFLICT (namespace, hour) DO UPDATE SET runs = namespace_runs.runs
    RETURNING namespace, runs
)
SELECT l.namespace, q.max_runs_per_hour, l.runs FROM locked l JOIN quota q ON q.name = l.namespace

-- name: namespace_runs_write
UPDATE namespace_runs r SET runs = r.runs + v.taken
FROM unnest(%(names)b::text[], %(taken)b::bigint[]) AS v(name, taken)
WHERE r.namespace = v.name AND r.hour = %(hour)s

-- Queries of the PostgreSQL AdminStore (drivers/postgres/admin.py): the same answers as the
-- SQLite ones (drivers/sqlite/admin_queries/admin.sql). Minutes are whole minutes since the
-- Unix epoch, UTC.

-- name: health_check
SELECT 1 AS ok

-- name: queue_list
-- Every queue with jobs, unfinished occurrences or a pause row; %(name)s = one queue or NULL.
-- With a namespace, the counts are of that namespace's jobs' occurrences, and the queues other
-- namespaces own are left out (shared ones and its own are listed).
WITH counts AS (
    SELECT queue AS name,
           count(*) FILTER (WHERE state IN ('scheduled', 'queued', 'retrying')) AS waiting,
           count(*) FILTER (WHERE state IN ('scheduled', 'queued', 'retrying')
                              AND due_at <= %(now)s) AS due,
           count(*) FILTER (WHERE state = 'running') AS running
    FROM occurrences
    WHERE state IN ('scheduled', 'queued', 'retrying', 'running')
      AND (%(name)s::text IS NULL OR queue = %(name)s::text)
      AND (%(namespace)s::text IS NULL
           OR job_id IN (SELECT id FROM jobs WHERE namespace = %(namespace)s::text))
    GROUP BY queue
), names AS (
    SELECT queue AS name FROM jobs
    WHERE deleted_at IS NULL AND (%(name)s::text IS NULL OR queue = %(name)s::text)
    UNION SELECT name FROM counts
    UNION SELECT name FROM queues WHERE %(name)s::text IS NULL OR name = %(name)s::text
)
SELECT n.name, COALESCE(q.paused, false) AS paused, COALESCE(c.waiting, 0) AS waiting,
       COALESCE(c.due, 0) AS due, COALESCE(c.running, 0) AS running,
       q.max_running, q.rate_count, q.rate_seconds, q.burst, q.tokens, q.tokens_at, q.namespace
FROM names n
LEFT JOIN counts c ON c.name = n.name
LEFT JOIN queues q ON q.name = n.name
WHERE %(namespace)s::text IS NULL OR q.namespace IS NULL OR q.namespace = %(namespace)s::text
ORDER BY n.name COLLATE "C"

-- name: queue_names
-- The queues with waiting or running occurrences, or a row, for the schedulers' catalog. Each
-- partial index is skipped through queue by queue (a loose index scan: one descent per queue),
-- so the cost is the number of queues, not of occurrences; jobs are not read at all (a
-- queue_list every 10 s counted them all: 0.8 s a pass with 288,000 jobs).
WITH RECURSIVE waiting AS (
    (SELECT queue FROM occurrences WHERE state IN ('scheduled', 'queued', 'retrying')
     ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT o.queue FROM occurrences o
            WHERE o.state IN ('scheduled', 'queued', 'retrying') AND o.queue > w.queue
            ORDER BY o.queue LIMIT 1)
    FROM waiting w WHERE w.queue IS NOT NULL
), running AS (
    (SELECT queue FROM occurrences WHERE state = 'running' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT o.queue FROM occurrences o
            WHERE o.state = 'running' AND o.queue > r.queue ORDER BY o.queue LIMIT 1)
    FROM running r WHERE r.queue IS NOT NULL
)
SELECT queue AS name FROM waiting WHERE queue IS NOT NULL
UNION SELECT queue FROM running WHERE queue IS NOT NULL
UNION SELECT name FROM queues

-- name: queue_set_paused
INSERT INTO queues (name, paused, updated_at) VALUES (%s, %s, %s)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at

-- name: stats_jobs
-- The stats count the whole store, or with a namespace that namespace's jobs and their runs.
SELECT count(*) AS jobs, count(*) FILTER (WHERE paused) AS paused FROM jobs
WHERE deleted_at IS NULL AND (%(namespace)s::text IS NULL OR namespace = %(namespace)s::text)

-- name: stats_states
SELECT state, count(*) AS n FROM occurrences
WHERE %(namespace)s::text IS NULL
   OR job_id IN (SELECT id FROM jobs WHERE namespace = %(namespace)s::text)
GROUP BY state

-- name: stats_outcomes
SELECT outcome, count(*) AS n FROM attempts
WHERE finished_at IS NOT NULL AND finished_at >= %(since)s
  AND (%(namespace)s::text IS NULL
       OR job_id IN (SELECT id FROM jobs WHERE namespace = %(namespace)s::text))
GROUP BY outcome

-- name: stats_finished_per_minute
SELECT floor(extract(epoch FROM finished_at) / 60)::bigint AS minute, count(*) AS n
FROM attempts
WHERE finished_at IS NOT NULL AND finished_at >= %(since)s
  AND (%(namespace)s::text IS NULL
       OR job_id IN (SELECT id FROM jobs WHERE namespace = %(namespace)s::text))
GROUP BY 1

-- name: stats_lateness_per_minute
-- First attempts of scheduled occurrences: how long after its time each one started.
SELECT floor(extract(epoch FROM a.started_at) / 60)::bigint AS minute,
       avg(extract(epoch FROM a.started_at - a.scheduled_at))::double precision AS avg_s,
       max(extract(epoch FROM a.started_at - a.scheduled_at))::double precision AS max_s
FROM attempts a JOIN occurrences o ON o.job_id = a.job_id AND o.scheduled_at = a.scheduled_at
WHERE a.finished_at IS NOT NULL AND a.finished_at >= %(since)s AND a.started_at >= %(since)s
  AND a.number = 1 AND o.trigger = 'schedule'
  AND (%(namespace)s::text IS NULL
       OR a.job_id IN (SELECT id FROM jobs WHERE namespace = %(namespace)s::text))
GROUP BY 1

-- name: job_states
SELECT state, count(*) AS n FROM occurrences WHERE job_id = %s GROUP BY state

-- name: job_last_run
SELECT scheduled_at, state FROM occurrences
WHERE job_id = %s AND state NOT IN ('scheduled', 'queued')
ORDER BY scheduled_at DESC LIMIT 1

-- name: job_last_finished
SELECT scheduled_at, state, trigger FROM occurrences
WHERE job_id = %s AND state IN ('succeeded', 'dead', 'crashed', 'missed', 'skipped_overlap',
                                'cancelled')
ORDER BY scheduled_at DESC LIMIT %s

-- name: job_first_starts
SELECT scheduled_at, started_at FROM attempts
WHERE job_id = %s AND number = 1 AND started_at IS NOT NULL AND scheduled_at >= %s

-- name: token_insert
INSERT INTO api_tokens (id, name, scope, token_hash, created_at, namespace)
VALUES (%s, %s, %s, %s, %s, %s)
RETURNING *

-- name: token_by_hash
SELECT * FROM api_tokens WHERE token_hash = %s AND revoked_at IS NULL

-- name: token_touch
UPDATE api_tokens SET last_used_at = %s WHERE id = %s

-- name: token_list
SELECT * FROM api_tokens ORDER BY created_at, id COLLATE "C"

-- name: token_revoke
-- The active token with this id or name (an id first, should a name equal another's id).
UPDATE api_tokens SET revoked_at = %(now)s
WHERE id = (SELECT id FROM api_tokens
            WHERE (id = %(ref)s OR name = %(ref)s) AND revoked_at IS NULL
              AND (%(namespace)s::text IS NULL OR namespace = %(namespace)s::text)
            ORDER BY id = %(ref)s DESC LIMIT 1)
  AND revoked_at IS NULL
RETURNING *

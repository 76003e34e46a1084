-- Queries of the SQLite AdminStore (drivers/sqlite/admin.py). Instants are microseconds, UTC.

-- name: queue_list
-- Every queue with jobs, unfinished occurrences or a pause row; :now for "due". With
-- :namespace, the counts are of that namespace's jobs' occurrences, and the queues other
-- namespaces own are left out (shared ones and its own are listed).
WITH names AS (
    SELECT queue AS name FROM jobs WHERE deleted_at IS NULL
    UNION SELECT queue FROM occurrences WHERE state IN ('scheduled', 'queued', 'retrying', 'running')
    UNION SELECT name FROM queues
)
SELECT n.name AS name,
       COALESCE((SELECT q.paused FROM queues q WHERE q.name = n.name), 0) AS paused,
       (SELECT COUNT(*) FROM occurrences o WHERE o.queue = n.name
          AND o.state IN ('scheduled', 'queued', 'retrying')
          AND (:namespace IS NULL OR o.job_id IN (SELECT id FROM jobs WHERE namespace = :namespace))
       ) AS waiting,
       (SELECT COUNT(*) FROM occurrences o WHERE o.queue = n.name
          AND o.state IN ('scheduled', 'queued', 'retrying') AND o.due_at <= :now
          AND (:namespace IS NULL OR o.job_id IN (SELECT id FROM jobs WHERE namespace = :namespace))
       ) AS due,
       (SELECT COUNT(*) FROM occurrences o WHERE o.queue = n.name AND o.state = 'running'
          AND (:namespace IS NULL OR o.job_id IN (SELECT id FROM jobs WHERE namespace = :namespace))
       ) AS running,
       q.max_running, q.rate_count, q.rate_seconds, q.burst, q.tokens, q.tokens_at, q.namespace
FROM names n LEFT JOIN queues q ON q.name = n.name
WHERE (:name IS NULL OR n.name = :name)
  AND (:namespace IS NULL OR q.namespace IS NULL OR q.namespace = :namespace)
ORDER BY n.name

-- name: queue_names
-- The queues with waiting or running occurrences, or a row (the schedulers' catalog).
SELECT DISTINCT queue AS name FROM occurrences INDEXED BY occurrences_due
WHERE state IN ('scheduled', 'queued', 'retrying')
UNION SELECT queue FROM occurrences WHERE state = 'running'
UNION SELECT name FROM queues

-- name: queue_set_paused
INSERT INTO queues (name, paused, updated_at) VALUES (?, ?, ?)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at

-- name: stats_jobs
-- The stats count the whole store, or with :namespace that namespace's jobs and their runs.
SELECT COUNT(*) AS jobs, COALESCE(SUM(paused), 0) AS paused FROM jobs
WHERE deleted_at IS NULL AND (:namespace IS NULL OR namespace = :namespace)

-- name: stats_states
SELECT state, COUNT(*) AS n FROM occurrences
WHERE :namespace IS NULL OR job_id IN (SELECT id FROM jobs WHERE namespace = :namespace)
GROUP BY state

-- name: stats_outcomes
SELECT outcome, COUNT(*) AS n FROM attempts
WHERE finished_at IS NOT NULL AND finished_at >= :since
  AND (:namespace IS NULL OR job_id IN (SELECT id FROM jobs WHERE namespace = :namespace))
GROUP BY outcome

-- name: stats_finished_per_minute
SELECT finished_at / 60000000 AS minute, COUNT(*) AS n FROM attempts
WHERE finished_at IS NOT NULL AND finished_at >= :since
  AND (:namespace IS NULL OR job_id IN (SELECT id FROM jobs WHERE namespace = :namespace))
GROUP BY minute

-- name: stats_lateness_per_minute
-- First attempts of scheduled occurrences: how long after its time each one started.
SELECT a.started_at / 60000000 AS minute, AVG(a.started_at - a.scheduled_at) AS avg_us,
       MAX(a.started_at - a.scheduled_at) AS max_us
FROM attempts a JOIN occurrences o ON o.job_id = a.job_id AND o.scheduled_at = a.scheduled_at
WHERE a.finished_at IS NOT NULL AND a.finished_at >= :since AND a.started_at >= :since
  AND a.number = 1 AND o.trigger = 'schedule'
  AND (:namespace IS NULL OR a.job_id IN (SELECT id FROM jobs WHERE namespace = :namespace))
GROUP BY minute

-- name: job_states
SELECT state, COUNT(*) AS n FROM occurrences WHERE job_id = ? GROUP BY state

-- name: job_last_run
SELECT scheduled_at, state FROM occurrences
WHERE job_id = ? AND state NOT IN ('scheduled', 'queued')
ORDER BY scheduled_at DESC LIMIT 1

-- name: job_last_finished
SELECT scheduled_at, state, trigger FROM occurrences
WHERE job_id = ? AND state IN ('succeeded', 'dead', 'crashed', 'missed', 'skipped_overlap', 'cancelled')
ORDER BY scheduled_at DESC LIMIT ?

-- name: job_first_starts
SELECT scheduled_at, started_at FROM attempts
WHERE job_id = ? AND number = 1 AND started_at IS NOT NULL AND scheduled_at >= ?

-- name: token_insert
INSERT INTO api_tokens (id, name, scope, token_hash, created_at, namespace)
VALUES (?, ?, ?, ?, ?, ?)

-- name: token_by_hash
SELECT * FROM api_tokens WHERE token_hash = ? AND revoked_at IS NULL

-- name: token_touch
UPDATE api_tokens SET last_used_at = ? WHERE id = ?

-- name: token_list
SELECT * FROM api_tokens ORDER BY created_at, id

-- name: token_active_by_ref
SELECT * FROM api_tokens WHERE (id = ? OR name = ?) AND revoked_at IS NULL
  AND (? IS NULL OR namespace = ?)

-- name: token_by_id
SELECT * FROM api_tokens WHERE id = ?

-- name: token_revoke
UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL

-- name: occurrence_insert
INSERT INTO occurrences (job_id, scheduled_at, due_at, queue, priority, state, max_attempts,
                         trigger, created_at, updated_at, finished_at, overlap)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (job_id, scheduled_at) DO NOTHING

-- name: occurrence_get
SELECT * FROM occurrences WHERE job_id = ? AND scheduled_at = ?

-- name: occurrence_candidates
-- A buffer_all occurrence waits while its job runs or, if it never started itself, while a run
-- of the job waits to retry (the policy's plan, claiming.py, decides the same). An occurrence's
-- own overlap (a backfill's choice) stands in for its job's.
-- A run its namespace's hourly quota already held (limited_at) is left out while the quota of
-- the hour is used up: it cannot start, and would keep the runs of other namespaces behind it
-- from being looked at. One not looked at yet still comes, so the claim notes it as held and
-- the catch-up window spares it (drivers/limits.py).
-- When a backlog fills the batch, the claim asks again for its fresh share: the same query with
-- FRESH_ORDER in place of ORDER_OLDEST (sqlite/claims.py), the newest due first, of the top
-- priority and due after every row of the first answer (so never one of them).
SELECT o.*, j.spec AS job_spec, j.version AS job_version, j.next_run_at AS job_next_run_at,
       j.created_at AS job_created_at, j.updated_at AS job_updated_at, j.shard AS job_shard,
       j.namespace AS job_namespace
FROM occurrences o JOIN jobs j ON j.id = o.job_id
WHERE o.queue = :queue AND o.state IN ('scheduled', 'queued', 'retrying') AND o.due_at <= :now
  AND j.paused = 0 AND j.deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = :queue AND q.paused = 1)
  AND NOT (COALESCE(o.overlap, j.overlap) = 'buffer_all' AND (
      EXISTS (SELECT 1 FROM occurrences r WHERE r.job_id = o.job_id AND r.state = 'running')
      OR (o.attempt = 0 AND o.state <> 'retrying' AND EXISTS (
          SELECT 1 FROM occurrences r WHERE r.job_id = o.job_id AND r.state = 'retrying'))))
  AND (o.limited_at IS NULL OR j.namespace NOT IN (
      SELECT nq.name FROM namespaces nq
      LEFT JOIN namespace_runs nr ON nr.namespace = nq.name AND nr.hour = :hour
      WHERE nq.max_runs_per_hour IS NOT NULL AND COALESCE(nr.runs, 0) >= nq.max_runs_per_hour))
ORDER BY o.priority DESC, o.due_at
LIMIT :limit

-- name: occurrence_mark
UPDATE occurrences SET state = ?, finished_at = ?, updated_at = ?, last_error = ?
WHERE job_id = ? AND scheduled_at = ?

-- name: occurrence_claim
UPDATE occurrences
SET state = 'running', attempt = attempt + 1, lease_until = ?, worker = ?, updated_at = ?
WHERE job_id = ? AND scheduled_at = ? AND state IN ('scheduled', 'queued', 'retrying')

-- name: occurrence_complete
UPDATE occurrences
SET state = ?, due_at = COALESCE(?, due_at), lease_until = NULL, updated_at = ?,
    finished_at = ?, last_error = ?
WHERE job_id = ? AND scheduled_at = ? AND attempt = ? AND state = 'running'

-- name: occurrence_heartbeat
-- now + max(extend_seconds, the job's timeout): a lease is never shorter than the timeout.
UPDATE occurrences
SET lease_until = MAX(lease_until, ? + CAST(1000000 * MAX(?, COALESCE(
        (SELECT json_extract(j.spec, '$.timeout_seconds') FROM jobs j
         WHERE j.id = occurrences.job_id), 0)) AS INTEGER)),
    updated_at = ?
WHERE job_id = ? AND scheduled_at = ? AND attempt = ? AND state = 'running' AND worker = ?

-- name: occurrence_release
UPDATE occurrences
SET state = CASE WHEN attempt > 1 THEN 'retrying' ELSE 'scheduled' END,
    attempt = attempt - 1, due_at = ?, lease_until = NULL, worker = NULL, updated_at = ?
WHERE job_id = ? AND scheduled_at = ? AND attempt = ? AND state = 'running' AND worker = ?

-- name: occurrence_expired
SELECT o.*, j.spec AS job_spec, j.version AS job_version
FROM occurrences o JOIN jobs j ON j.id = o.job_id
WHERE o.state = 'running' AND (o.lease_until < ? OR (? AND o.worker IS NOT ?))
LIMIT ?

-- name: occurrence_rescue
UPDATE occurrences
SET state = ?, due_at = ?, lease_until = NULL, updated_at = ?, finished_at = ?, last_error = ?
WHERE job_id = ? AND scheduled_at = ? AND attempt = ? AND state = 'running'

-- name: occurrence_cancel_job
UPDATE occurrences SET state = 'cancelled', finished_at = ?, updated_at = ?, lease_until = NULL,
    last_error = ?
WHERE job_id = ? AND state IN ('scheduled', 'queued', 'retrying', 'running')

-- name: occurrence_unfinished_of_job
-- What an overlap policy looks at: the job's running attempts, and its occurrences that started
-- and wait to run again (retrying, due or not). Each half reads its own partial index, named:
-- without ANALYZE statistics SQLite walks the primary key instead, every row the job ever had
-- (6 ms for 50,000 rows against 3 us).
SELECT job_id, scheduled_at, attempt, state FROM occurrences INDEXED BY occurrences_job_running
WHERE job_id = :job_id AND state = 'running'
UNION ALL
SELECT job_id, scheduled_at, attempt, state FROM occurrences INDEXED BY occurrences_job_retrying
WHERE job_id = :job_id AND state = 'retrying'

-- name: occurrence_next_due
-- The same eligibility as occurrence_candidates, so a worker never wakes for what it cannot claim.
-- Read in the order of occurrences_due (queue, priority DESC, due_at): its priorities are
-- skipped through one by one, and each one's waiting rows read from the earliest until one is
-- eligible, so the cost is the number of priorities, not of waiting rows. MIN(due_at) over the
-- queue read every waiting row: 14 % of the store thread in W1 at 100,000 jobs.
WITH RECURSIVE levels(priority) AS (
    SELECT (SELECT o.priority FROM occurrences o
            WHERE o.queue = :queue AND o.state IN ('scheduled', 'queued', 'retrying')
            ORDER BY o.priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT o.priority FROM occurrences o
            WHERE o.queue = :queue AND o.state IN ('scheduled', 'queued', 'retrying')
              AND o.priority < l.priority
            ORDER BY o.priority DESC LIMIT 1)
    FROM levels l WHERE l.priority IS NOT NULL
)
SELECT MIN((
    SELECT o.due_at FROM occurrences o JOIN jobs j ON j.id = o.job_id
    WHERE o.queue = :queue AND o.priority = l.priority
      AND o.state IN ('scheduled', 'queued', 'retrying')
      AND j.paused = 0 AND j.deleted_at IS NULL
      AND NOT (COALESCE(o.overlap, j.overlap) = 'buffer_all' AND (
          EXISTS (SELECT 1 FROM occurrences r WHERE r.job_id = o.job_id AND r.state = 'running')
          OR (o.attempt = 0 AND o.state <> 'retrying' AND EXISTS (
              SELECT 1 FROM occurrences r WHERE r.job_id = o.job_id AND r.state = 'retrying'))))
      AND (o.limited_at IS NULL OR j.namespace NOT IN (
          SELECT nq.name FROM namespaces nq
          LEFT JOIN namespace_runs nr ON nr.namespace = nq.name AND nr.hour = :hour
          WHERE nq.max_runs_per_hour IS NOT NULL AND COALESCE(nr.runs, 0) >= nq.max_runs_per_hour))
    ORDER BY o.due_at LIMIT 1))
FROM levels l
WHERE l.priority IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = :queue AND q.paused = 1)

-- name: occurrence_insert_chained
-- One run a chain triggered (drivers/chaining.py): insert-if-absent; no change means the
-- instant is taken, and the caller reads whose it is (occurrence_upstream).
INSERT INTO occurrences (job_id, scheduled_at, due_at, queue, priority, state, max_attempts,
                         trigger, created_at, updated_at, upstream)
VALUES (?, ?, ?, ?, ?, 'scheduled', ?, 'chain', ?, ?, ?)
ON CONFLICT (job_id, scheduled_at) DO NOTHING

-- name: occurrence_upstream
SELECT trigger, upstream FROM occurrences WHERE job_id = ? AND scheduled_at = ?

-- name: job_by_name_live
-- A chain names jobs of its own job's namespace (the second parameter: its job's id).
SELECT id, name, version, spec FROM jobs WHERE name = ? AND deleted_at IS NULL
  AND namespace = (SELECT u.namespace FROM jobs u WHERE u.id = ?)

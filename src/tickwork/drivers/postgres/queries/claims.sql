-- name: occurrence_candidates
-- Due occurrences of one queue (none while the queue is paused), locked; rows another
-- claimer holds are skipped. With server_clock, due-ness also needs the database's own clock
-- to agree (DESIGN rule 6): a worker whose clock runs fast never starts a job early. A
-- buffer_all occurrence waits while its job runs or, if it never started itself, while a run of
-- the job waits to retry (the policy's plan, claiming.py, decides the same). An occurrence's
-- own overlap (a backfill's choice) stands in for its job's, here and in claim_overlap.
-- Only the columns a claim decides on (the claim itself returns the whole occurrence).
-- queue_limited and keys_limited (each computed once, not per row): whether the claim must
-- read limits (postgres/limits.py); when neither is set it costs nothing more.
SELECT o.job_id, o.scheduled_at, o.state, o.attempt, o.trigger, j.spec AS job_spec,
       j.version AS job_version, j.next_run_at AS job_next_run_at,
       j.created_at AS job_created_at, j.updated_at AS job_updated_at, j.shard AS job_shard,
       j.namespace AS job_namespace,
       o.overlap, COALESCE(o.overlap, j.overlap) AS claim_overlap, o.queue, o.limited_at,
       EXISTS (SELECT 1 FROM queues ql WHERE ql.name = %(queue)s
               AND (ql.max_running IS NOT NULL OR ql.rate_count IS NOT NULL)) AS queue_limited,
       EXISTS (SELECT 1 FROM limit_keys) AS keys_limited
FROM occurrences o JOIN jobs j ON j.id = o.job_id
WHERE o.queue = %(queue)s AND o.state IN ('scheduled', 'queued', 'retrying')
  AND o.due_at <= %(now)s AND (NOT %(server_clock)s OR o.due_at <= statement_timestamp())
  AND NOT j.paused AND j.deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = o.queue AND q.paused)
  AND NOT (COALESCE(o.overlap, j.overlap) = 'buffer_all' AND (
      EXISTS (SELECT 1 FROM occurrences r WHERE r.job_id = o.job_id AND r.state = 'running')
      OR (o.attempt = 0 AND o.state <> 'retrying' AND EXISTS (
          SELECT 1 FROM occurrences r WHERE r.job_id = o.job_id AND r.state = 'retrying'))))
ORDER BY o.priority DESC, o.due_at
LIMIT %(limit)s
FOR UPDATE OF o SKIP LOCKED

-- name: job_overlap_locks
-- One claimer at a time decides for a job whose overlap policy looks at what runs: a
-- transaction-scoped advisory lock per job. A try-lock: a job another claimer holds is left
-- for the next claim, so claimers never wait on each other and never deadlock.
SELECT id FROM unnest(%b::text[]) AS id
WHERE pg_try_advisory_xact_lock(1953063787, hashtext(id))

-- name: occurrence_unfinished_of_jobs
-- What an overlap policy looks at: the jobs' running attempts, and their occurrences that
-- started and wait to run again (retrying, due or not); each half reads its own partial index.
-- A new statement, so it sees every claim committed before this claimer took the job locks.
SELECT job_id, scheduled_at, attempt, state FROM occurrences
WHERE job_id = ANY(%(job_ids)b::text[]) AND state = 'running'
UNION ALL
SELECT job_id, scheduled_at, attempt, state FROM occurrences
WHERE job_id = ANY(%(job_ids)b::text[]) AND state = 'retrying'

-- name: occurrence_mark
UPDATE occurrences o
SET state = v.state, finished_at = %(now)s, updated_at = %(now)s, last_error = v.why
FROM unnest(%(job_ids)b::text[], %(scheduled)b::timestamptz[], %(states)b::text[],
            %(whys)b::text[]) AS v(job_id, scheduled_at, state, why)
WHERE o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at

-- name: occurrence_cancel_running
WITH cancelled AS (
    UPDATE occurrences o
    SET state = 'cancelled', finished_at = %(now)s, updated_at = %(now)s, lease_until = NULL,
        last_error = %(why)s
    FROM unnest(%(job_ids)b::text[], %(scheduled)b::timestamptz[], %(attempts)b::integer[])
         AS v(job_id, scheduled_at, attempt)
    WHERE o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at AND o.attempt = v.attempt
      AND o.state = 'running'
    RETURNING o.job_id, o.scheduled_at, o.attempt
)
UPDATE attempts a SET finished_at = %(now)s, outcome = 'failed', error = %(why)s
FROM cancelled c
WHERE a.job_id = c.job_id AND a.scheduled_at = c.scheduled_at AND a.number = c.attempt

-- name: occurrence_claim
-- Running, attempt + 1, a lease, and the attempt row, for the whole batch in one statement.
WITH v AS (
    SELECT * FROM unnest(%(job_ids)b::text[], %(scheduled)b::timestamptz[],
                         %(leases)b::timestamptz[]) AS v(job_id, scheduled_at, lease_until)
), claimed AS (
    UPDATE occurrences o
    SET state = 'running', attempt = o.attempt + 1, lease_until = v.lease_until,
        worker = %(worker)s, updated_at = %(now)s
    FROM v
    WHERE o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at
      AND o.state IN ('scheduled', 'queued', 'retrying')
    RETURNING o.*
), recorded AS (
    INSERT INTO attempts (job_id, scheduled_at, number, worker, queued_at, claimed_at)
    SELECT job_id, scheduled_at, attempt, worker, due_at, %(now)s FROM claimed
)
SELECT * FROM claimed

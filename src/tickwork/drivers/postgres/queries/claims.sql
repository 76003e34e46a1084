-- name: occurrence_candidates
-- Due occurrences of one queue (none while the queue is paused), locked; rows another
-- claimer holds are skipped. With server_clock, due-ness also needs the database's own clock
-- to agree (DESIGN rule 6): a worker whose clock runs fast never starts a job early. A
-- buffer_all occurrence waits while its job runs or, if it never started itself, while a run of
-- the job waits to retry (the policy's plan, claiming.py, decides the same). An occurrence's
-- own overlap (a backfill's choice) stands in for its job's, here and in claim_overlap.
-- A run its namespace's hourly quota already held (limited_at) is left out while the quota of
-- the hour is used up: it cannot start, and would keep the runs of other namespaces behind it
-- from being looked at. One not looked at yet still comes, so the claim notes it as held and
-- the catch-up window spares it (drivers/limits.py).
-- The occurrence's own columns, so the claimed occurrence is built from this row (the claim
-- returns only the keys it changed: the row is locked, nothing else moves it in between).
-- When a backlog fills the batch, the claim asks again for its fresh share: the same query with
-- FRESH_ORDER in place of ORDER_OLDEST (postgres/claims.py), the newest due first, of the top
-- priority and due after every row of the first answer (so never one of them).
-- Each row's job is looked up by its primary key alone in a lateral subquery (never flattened
-- into a join), so the rows come in the order of occurrences_due and the LIMIT stops the walk.
-- Joined, the generic plan made while the tables were empty hashed every job (read through the
-- partial index of live names) and sorted every due row, per claim.
-- The paused-queue check names the queue asked for, not each row's (the same queue): checked
-- once, before the walk. Correlated to the row, it was an anti-join whose estimate, once
-- ANALYZE had seen a burst, fell to one row, and the plan read and sorted every due row.
-- queue_limited, keys_limited and runs_limited (each computed once, not per row): whether the
-- claim must read limits (postgres/limits.py); when none is set it costs nothing more.
SELECT o.job_id, o.scheduled_at, o.state, o.attempt, o.trigger, o.priority, o.due_at,
       o.max_attempts, o.created_at, o.finished_at, o.last_error, o.upstream,
       j.spec AS job_spec,
       j.version AS job_version, j.next_run_at AS job_next_run_at,
       j.created_at AS job_created_at, j.updated_at AS job_updated_at, j.shard AS job_shard,
       j.namespace AS job_namespace,
       o.overlap, COALESCE(o.overlap, j.overlap) AS claim_overlap, o.queue, o.limited_at,
       o.ctid::text AS tid,
       EXISTS (SELECT 1 FROM queues ql WHERE ql.name = %(queue)s
               AND (ql.max_running IS NOT NULL OR ql.rate_count IS NOT NULL)) AS queue_limited,
       EXISTS (SELECT 1 FROM limit_keys) AS keys_limited,
       EXISTS (SELECT 1 FROM namespaces nq
               WHERE nq.max_runs_per_hour IS NOT NULL) AS runs_limited
FROM occurrences o CROSS JOIN LATERAL (
    SELECT j.spec, j.version, j.next_run_at, j.created_at, j.updated_at, j.shard, j.namespace,
           j.overlap, j.paused, j.deleted_at
    FROM jobs j WHERE j.id = o.job_id
    OFFSET 0
) j
WHERE o.queue = %(queue)s AND o.state IN ('scheduled', 'queued', 'retrying')
  AND o.due_at <= %(now)s AND (NOT %(server_clock)s OR o.due_at <= statement_timestamp())
  AND NOT j.paused AND j.deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = %(queue)s AND q.paused)
  AND NOT (COALESCE(o.overlap, j.overlap) = 'buffer_all' AND (
      EXISTS (SELECT 1 FROM occurrences r WHERE r.job_id = o.job_id AND r.state = 'running')
      OR (o.attempt = 0 AND o.state <> 'retrying' AND EXISTS (
          SELECT 1 FROM occurrences r WHERE r.job_id = o.job_id AND r.state = 'retrying'))))
  AND (o.limited_at IS NULL OR j.namespace <> ALL (ARRAY(
      SELECT nq.name FROM namespaces nq
      LEFT JOIN namespace_runs nr ON nr.namespace = nq.name AND nr.hour = %(hour)s
      WHERE nq.max_runs_per_hour IS NOT NULL AND COALESCE(nr.runs, 0) >= nq.max_runs_per_hour)))
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
-- started and wait to run again (retrying, due or not), from the one index of exactly these
-- rows (occurrences_job_unfinished: no other index's predicate matches this one).
-- A new statement, so it sees every claim committed before this claimer took the job locks.
SELECT job_id, scheduled_at, attempt, state FROM occurrences
WHERE job_id = ANY(%(job_ids)b::text[]) AND state IN ('running', 'retrying')

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
    RETURNING o.job_id, o.scheduled_at, o.attempt, o.worker, o.due_at, o.claimed_at
)
INSERT INTO attempts (job_id, scheduled_at, number, worker, queued_at, claimed_at,
                      finished_at, outcome, error)
SELECT job_id, scheduled_at, attempt, worker, due_at, COALESCE(claimed_at, %(now)s), %(now)s,
       'failed', %(why)s
FROM cancelled
ON CONFLICT (job_id, scheduled_at, number) DO UPDATE
SET finished_at = excluded.finished_at, outcome = excluded.outcome, error = excluded.error

-- name: occurrence_claim
-- Running, attempt + 1, a lease and the claim's time, for the whole batch in one statement.
-- The attempt's row is written when the attempt ends (occurrence_complete and the statements
-- that rescue or cancel it); until then attempt_list reads it from the occurrence.
-- Only the keys come back: the caller holds the rows it locked and knows what changed.
-- Each row is updated by the ctid its locking read returned (the version it locked): this
-- transaction holds the row locks, so no other can move them in between, and no index is read
-- to find them again. A ctid that no longer names the row (never expected) matches nothing,
-- and the caller leaves that run out of the claim. Each is fetched in a lateral subquery
-- (never flattened into a join), so the UPDATE takes the rows one by one by their ctid
-- (a TID scan) whatever the statistics say: joined to the list of ctids, or naming them as
-- a list, a plan made while the statistics said a handful of runs wait is a seq scan. The
-- guard on the state is a sub-select: named as constants, it matched occurrences_due, and a
-- generic plan made while a few runs waited walked that index for every row handed over (50 s
-- a claim with 1,000,000 waiting); the statement is planned for each claim, never from a plan
-- cached while the table was small (postgres/claims.py).
WITH v AS (
    SELECT * FROM unnest(%(tids)b::text[], %(leases)b::timestamptz[]) AS v(tid, lease_until)
), found AS (
    SELECT f.tid, v.lease_until
    FROM v CROSS JOIN LATERAL (
        SELECT o.ctid AS tid FROM occurrences o WHERE o.ctid = v.tid::tid OFFSET 0
    ) f
), claimed AS (
    UPDATE occurrences o
    SET state = 'running', attempt = o.attempt + 1, lease_until = found.lease_until,
        worker = %(worker)s, updated_at = %(now)s, claimed_at = %(now)s
    FROM found
    WHERE o.ctid = found.tid
      AND o.state = ANY ((SELECT ARRAY['scheduled', 'queued', 'retrying'])::text[])
    RETURNING o.job_id, o.scheduled_at
)
SELECT job_id, scheduled_at FROM claimed

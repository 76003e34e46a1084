-- name: occurrence_keys_lock
-- Delivered keys, locked as occurrence_candidates locks them: rows another claimer holds are
-- skipped (they are read again below, without a lock). server_due: the database's own clock
-- agrees the occurrence is due (DESIGN rule 6), when server_clock asks for it. Joined on the
-- whole key, so the primary key finds each row: a recurring job has thousands of occurrences,
-- and matching on job_id alone would read them all for every key. Looked up key by key (a
-- locking subquery is never flattened into a join): the prepared statement's generic plan is
-- made while the table is new and small, and a hash join over a scan of the whole table, the
-- cheapest plan then, stayed the plan as the table grew (27 scans a second of 40,000 rows).
SELECT o.*, j.spec AS job_spec, j.version AS job_version, j.next_run_at AS job_next_run_at,
       j.created_at AS job_created_at, j.updated_at AS job_updated_at, j.shard AS job_shard,
       j.namespace AS job_namespace, COALESCE(o.overlap, j.overlap) AS claim_overlap, j.paused AS job_paused, j.deleted_at IS NOT NULL AS job_deleted,
       EXISTS (SELECT 1 FROM queues q WHERE q.name = o.queue AND q.paused) AS queue_paused,
       (NOT %(server_clock)s OR o.due_at <= statement_timestamp()) AS server_due,
       EXISTS (SELECT 1 FROM queues ql WHERE ql.name = o.queue
               AND (ql.max_running IS NOT NULL OR ql.rate_count IS NOT NULL)) AS queue_limited,
       EXISTS (SELECT 1 FROM limit_keys) AS keys_limited,
       EXISTS (SELECT 1 FROM namespaces nq
               WHERE nq.max_runs_per_hour IS NOT NULL) AS runs_limited
FROM unnest(%(job_ids)b::text[], %(scheduled)b::timestamptz[]) AS v(job_id, scheduled_at)
CROSS JOIN LATERAL (
    SELECT o.*, o.ctid::text AS tid FROM occurrences o
    WHERE o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at
    FOR UPDATE SKIP LOCKED
) o
JOIN jobs j ON j.id = o.job_id

-- name: occurrence_keys_peek
-- The keys the lock skipped: only their state and due time, as committed now. Key by key,
-- as above (OFFSET 0 keeps the subquery from being flattened into a join).
SELECT o.job_id, o.scheduled_at, o.state, o.due_at
FROM unnest(%(job_ids)b::text[], %(scheduled)b::timestamptz[]) AS v(job_id, scheduled_at)
CROSS JOIN LATERAL (
    SELECT * FROM occurrences o
    WHERE o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at
    OFFSET 0
) o

-- name: occurrence_waiting
-- The reconciler's pages: waiting occurrences of one queue, job live, in key order.
SELECT o.job_id, o.scheduled_at, o.due_at, o.priority
FROM occurrences o JOIN jobs j ON j.id = o.job_id
WHERE o.queue = %(queue)s AND o.state IN ('scheduled', 'queued', 'retrying')
  AND NOT j.paused AND j.deleted_at IS NULL
  AND (%(after_job)s::text IS NULL
       OR (o.job_id, o.scheduled_at) > (%(after_job)s::text, %(after_at)s::timestamptz))
  AND (%(due_before)s::timestamptz IS NULL OR o.due_at < %(due_before)s::timestamptz)
ORDER BY o.job_id, o.scheduled_at
LIMIT %(limit)s

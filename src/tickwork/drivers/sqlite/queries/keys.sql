-- name: occurrence_for_key
-- One delivered key with what a claim by key needs: its job, and whether it is held back.
SELECT o.*, j.spec AS job_spec, j.version AS job_version, j.next_run_at AS job_next_run_at,
       j.created_at AS job_created_at, j.updated_at AS job_updated_at, j.shard AS job_shard,
       j.namespace AS job_namespace,
       j.paused AS job_paused, j.deleted_at IS NOT NULL AS job_deleted,
       EXISTS (SELECT 1 FROM queues q WHERE q.name = o.queue AND q.paused = 1) AS queue_paused
FROM occurrences o JOIN jobs j ON j.id = o.job_id
WHERE o.job_id = ? AND o.scheduled_at = ?

-- name: occurrence_waiting
-- The reconciler's pages: waiting occurrences of one queue, job live, in key order.
SELECT o.job_id, o.scheduled_at, o.due_at, o.priority
FROM occurrences o JOIN jobs j ON j.id = o.job_id
WHERE o.queue = :queue AND o.state IN ('scheduled', 'queued', 'retrying')
  AND j.paused = 0 AND j.deleted_at IS NULL
  AND (:after_job IS NULL OR (o.job_id, o.scheduled_at) > (:after_job, :after_at))
  AND (:due_before IS NULL OR o.due_at < :due_before)
ORDER BY o.job_id, o.scheduled_at
LIMIT :limit

-- name: dedupe_take
-- Take the key for a new job: inserted, or taken over once expired. No row back: held.
INSERT INTO job_dedupe (key, job_id, expires_at) VALUES (%(key)s, %(job_id)s, %(until)s)
ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id, expires_at = excluded.expires_at
WHERE job_dedupe.expires_at <= %(now)s
RETURNING job_id

-- name: dedupe_holder
SELECT job_id FROM job_dedupe WHERE key = %(key)s

-- name: dedupe_take_over
-- The holder's job is deleted or purged: take the key, unless another enqueue just did.
UPDATE job_dedupe SET job_id = %(job_id)s, expires_at = %(until)s
WHERE key = %(key)s AND job_id = %(holder)s
RETURNING job_id

-- name: jobs_purge_finished
-- One-off jobs whose run ended before the cut-off (and not changed since): no waiting or
-- running occurrence, none finished at or after it.
WITH gone AS (
    SELECT j.id FROM jobs j
    WHERE j.deleted_at IS NULL AND j.next_run_at IS NULL AND NOT j.paused
      AND j.updated_at < %(before)s
      AND (j.spec::jsonb #>> '{schedule,type}') = 'at'
      AND NOT EXISTS (
          SELECT 1 FROM occurrences o WHERE o.job_id = j.id
            AND (o.state IN ('scheduled', 'queued', 'retrying', 'running')
                 OR o.finished_at >= %(before)s))
    ORDER BY j.updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
DELETE FROM jobs WHERE id IN (SELECT id FROM gone) RETURNING id

-- name: jobs_purge_deleted
WITH gone AS (
    SELECT j.id FROM jobs j
    WHERE j.deleted_at < %(before)s
      AND NOT EXISTS (
          SELECT 1 FROM occurrences o WHERE o.job_id = j.id
            AND o.state IN ('scheduled', 'queued', 'retrying', 'running'))
    ORDER BY j.deleted_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
DELETE FROM jobs WHERE id IN (SELECT id FROM gone) RETURNING id

-- name: dedupe_purge_jobs
DELETE FROM job_dedupe WHERE job_id = ANY(%(ids)s::text[])

-- name: dedupe_purge_expired
DELETE FROM job_dedupe WHERE key IN (
    SELECT key FROM job_dedupe WHERE expires_at <= %(now)s LIMIT %(limit)s)

-- name: audit_insert
INSERT INTO audit_log (created_at, actor, action, job_id, job_name, scheduled_at, details)
VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: job_name_any
-- A job's name, deleted or not (an audit entry names its job).
SELECT name FROM jobs WHERE id = ?

-- name: jobs_deleted_by_ref
SELECT * FROM jobs WHERE (id = ? OR name = ?) AND deleted_at IS NOT NULL
  AND (? IS NULL OR namespace = ?)
ORDER BY deleted_at DESC
LIMIT 100

-- name: occurrence_cancel_one
UPDATE occurrences SET state = 'cancelled', finished_at = ?, updated_at = ?, lease_until = NULL,
    last_error = ?
WHERE job_id = ? AND scheduled_at = ? AND state IN ('scheduled', 'queued', 'retrying', 'running')

-- name: attempt_close_running
-- Before occurrence_cancel_one: the attempt it stops gets an end.
UPDATE attempts SET finished_at = ?, outcome = 'failed', error = ?
WHERE finished_at IS NULL AND job_id = ? AND scheduled_at = ? AND number = (
    SELECT attempt FROM occurrences WHERE job_id = ? AND scheduled_at = ? AND state = 'running')

-- name: occurrence_retry
-- Back to retrying, due now: the next claim takes it as attempt n + 1 (a started run is never
-- skipped or missed, claiming.py). The job must not be deleted.
UPDATE occurrences SET state = 'retrying', due_at = ?, updated_at = ?, finished_at = NULL,
    lease_until = NULL, worker = NULL
WHERE job_id = ? AND scheduled_at = ? AND state IN ('dead', 'crashed', 'cancelled')
  AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = occurrences.job_id AND j.deleted_at IS NULL)

-- name: attempt_note
UPDATE attempts SET error = CASE WHEN error IS NULL OR error = '' THEN ? ELSE error || '; ' || ? END
WHERE job_id = ? AND scheduled_at = ? AND number = ? AND outcome IS NOT NULL

-- name: occurrence_note
UPDATE occurrences
SET last_error = CASE WHEN last_error IS NULL OR last_error = '' THEN ?
                      ELSE last_error || '; ' || ? END
WHERE job_id = ? AND scheduled_at = ? AND attempt = ? AND state <> 'running'

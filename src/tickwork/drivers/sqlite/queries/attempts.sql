-- name: attempt_insert
INSERT INTO attempts (job_id, scheduled_at, number, worker, queued_at, claimed_at)
VALUES (?, ?, ?, ?, ?, ?)

-- name: attempt_finish
UPDATE attempts SET started_at = ?, finished_at = ?, outcome = ?, output = ?, error = ?
WHERE job_id = ? AND scheduled_at = ? AND number = ?

-- name: attempt_delete
DELETE FROM attempts WHERE job_id = ? AND scheduled_at = ? AND number = ?

-- name: attempt_list
SELECT * FROM attempts WHERE job_id = ? AND scheduled_at = ? ORDER BY number

-- name: attempt_close_running_of_job
-- Before occurrence_cancel_job: the attempts it stops get an end, not a dangling 'running' row.
UPDATE attempts SET finished_at = ?, outcome = 'failed', error = ?
WHERE finished_at IS NULL AND (job_id, scheduled_at, number) IN (
    SELECT job_id, scheduled_at, attempt FROM occurrences WHERE job_id = ? AND state = 'running')

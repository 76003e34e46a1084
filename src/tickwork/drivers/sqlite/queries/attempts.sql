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

-- name: occurrences_old_finished
-- Finished runs only: a waiting or running occurrence stays, however old. A run never
-- finishes before it is scheduled, so the scheduled_at bound walks occurrences_scheduled.
SELECT job_id, scheduled_at FROM occurrences
WHERE scheduled_at < ? AND finished_at < ?
  AND state IN ('succeeded', 'dead', 'crashed', 'missed', 'skipped_overlap', 'cancelled')
LIMIT ?

-- name: attempts_of_run_delete
DELETE FROM attempts WHERE job_id = ? AND scheduled_at = ?

-- name: occurrence_delete
DELETE FROM occurrences WHERE job_id = ? AND scheduled_at = ?

-- name: audit_prune
DELETE FROM audit_log WHERE id IN (
    SELECT id FROM audit_log WHERE created_at < ? ORDER BY created_at, id LIMIT ?)

-- name: namespace_runs_prune
-- Hours of namespace runs wholly before the history kept: a claim only reads its own hour.
DELETE FROM namespace_runs WHERE hour + 3600000000 <= ?

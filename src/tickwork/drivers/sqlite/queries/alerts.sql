-- name: alert_insert_firing
INSERT INTO alerts (id, job_id, job_name, condition, state, detail, notified, fired_at,
                    updated_at)
VALUES (:id, :job_id, :job_name, :condition, 'firing', :detail, :notified, :now, :now)
ON CONFLICT (job_id, condition) WHERE state = 'firing' DO NOTHING

-- name: alert_last_notified
SELECT max(fired_at) AS fired_at FROM alerts
WHERE job_id = ? AND condition = ? AND notified = 1

-- name: alert_firing_of
SELECT * FROM alerts WHERE job_id = ? AND condition = ? AND state = 'firing'

-- name: alert_resolve
UPDATE alerts SET state = 'resolved', resolved_at = :now, updated_at = :now, detail = :detail
WHERE id = :id

-- name: alert_get
SELECT * FROM alerts WHERE id = ?

-- name: alert_list
SELECT * FROM alerts
WHERE (:job_id IS NULL OR job_id = :job_id) AND (:state IS NULL OR state = :state)
  AND (:before_at IS NULL OR fired_at < :before_at OR (fired_at = :before_at AND id < :before_id))
ORDER BY fired_at DESC, id DESC
LIMIT :limit

-- name: delivery_insert
INSERT INTO alert_deliveries (id, alert_id, event, channel, kind, payload, state, attempts,
                              next_attempt_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)

-- name: deliveries_of
SELECT * FROM alert_deliveries WHERE alert_id = ? ORDER BY created_at, event, channel

-- name: delivery_due
SELECT * FROM alert_deliveries WHERE state = 'pending' AND next_attempt_at <= ?
ORDER BY next_attempt_at, created_at, alert_id, event, channel LIMIT ?

-- name: delivery_taken
-- A delivery just taken, with its job's namespace: the channels' secrets resolve there ('' once
-- the job is gone: none does).
SELECT d.*, COALESCE((SELECT j.namespace FROM alerts al JOIN jobs j ON j.id = al.job_id
                      WHERE al.id = d.alert_id), '') AS job_namespace
FROM alert_deliveries d WHERE d.id = ?

-- name: delivery_take
UPDATE alert_deliveries SET attempts = attempts + 1, next_attempt_at = ? WHERE id = ?

-- name: delivery_finish
UPDATE alert_deliveries
SET state = :state, last_error = :error, next_attempt_at = coalesce(:retry_at, next_attempt_at),
    finished_at = :finished_at
WHERE id = :id AND attempts = :attempt AND state = 'pending'

-- name: facts_recent
SELECT scheduled_at, state FROM occurrences
WHERE job_id = ? AND state IN ('succeeded', 'dead', 'crashed', 'missed')
ORDER BY scheduled_at DESC LIMIT ?

-- name: facts_failed_since
SELECT scheduled_at, state FROM occurrences
WHERE job_id = ? AND state IN ('dead', 'crashed', 'missed')
  AND coalesce(finished_at, updated_at) >= ?
ORDER BY coalesce(finished_at, updated_at) DESC LIMIT 10

-- name: facts_last_success
SELECT max(coalesce(finished_at, updated_at)) AS at FROM occurrences
WHERE job_id = ? AND state = 'succeeded'

-- name: facts_late
SELECT min(due_at) AS at FROM occurrences
WHERE job_id = ? AND state IN ('scheduled', 'queued') AND attempt = 0 AND due_at <= ?

-- name: facts_running
SELECT min(a.claimed_at) AS at FROM occurrences o
JOIN attempts a ON a.job_id = o.job_id AND a.scheduled_at = o.scheduled_at
    AND a.number = o.attempt
WHERE o.job_id = ? AND o.state = 'running' AND a.claimed_at <= ?

-- name: alert_jobs
-- The live jobs that name alerts, through the index of exactly those (jobs_alerting).
SELECT * FROM jobs INDEXED BY jobs_alerting
WHERE deleted_at IS NULL AND instr(spec, '"alerts":') > 0 AND id > ?
ORDER BY id LIMIT ?

-- name: alert_jobs_every
-- Every live job: alert_defaults gives alerts to jobs that name none.
SELECT * FROM jobs
WHERE deleted_at IS NULL AND id > ?
ORDER BY id LIMIT ?

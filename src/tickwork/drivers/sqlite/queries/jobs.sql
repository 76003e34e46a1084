-- name: job_insert
INSERT INTO jobs (id, name, queue, priority, kind, overlap, spec, tags, paused, next_run_at,
                  created_at, updated_at, created_by, updated_by, namespace, once)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: job_by_id
-- planned_run_at (here and in job_by_name, job_list): a one-off job's run planned and not
-- started yet, whose time its next_run_at no longer holds once planned (drivers/rows.py).
SELECT *, (CASE WHEN once = 1 AND next_run_at IS NULL THEN (
    SELECT min(o.scheduled_at) FROM occurrences o
    WHERE o.job_id = jobs.id AND o.trigger = 'schedule' AND o.state IN ('scheduled', 'queued'))
  END) AS planned_run_at
FROM jobs WHERE id = ? AND deleted_at IS NULL

-- name: job_by_name
-- In one namespace, or (NULL) in 'default' first, then in the others by name.
SELECT *, (CASE WHEN once = 1 AND next_run_at IS NULL THEN (
    SELECT min(o.scheduled_at) FROM occurrences o
    WHERE o.job_id = jobs.id AND o.trigger = 'schedule' AND o.state IN ('scheduled', 'queued'))
  END) AS planned_run_at
FROM jobs WHERE name = ? AND deleted_at IS NULL AND (? IS NULL OR namespace = ?)
ORDER BY namespace <> 'default', namespace
LIMIT 1

-- name: jobs_in_namespace
SELECT count(*) FROM jobs WHERE namespace = ? AND deleted_at IS NULL

-- name: job_update
UPDATE jobs
SET name = ?, queue = ?, priority = ?, kind = ?, overlap = ?, spec = ?, tags = ?, paused = ?,
    next_run_at = ?, version = version + 1, updated_at = ?, updated_by = ?, once = ?
WHERE id = ? AND deleted_at IS NULL

-- name: occurrence_unplan
-- A job's schedule changed: the runs planned from the old one and not due yet go (never
-- claimed, so they have no attempt).
DELETE FROM occurrences
WHERE job_id = :id AND scheduled_at > :now AND trigger = 'schedule' AND attempt = 0
  AND state IN ('scheduled', 'queued')

-- name: job_set_paused
UPDATE jobs
SET paused = ?, spec = ?, next_run_at = ?, version = version + 1, updated_at = ?, updated_by = ?
WHERE id = ? AND deleted_at IS NULL

-- name: job_delete
UPDATE jobs SET deleted_at = ?, next_run_at = NULL, updated_at = ?, updated_by = ?
WHERE id = ? AND deleted_at IS NULL

-- name: job_due
-- Every job due by :until, then the one-off jobs due by :until_once (a longer horizon; NULL:
-- none), each part walking its own index in order (jobs_due, jobs_due_once) and stopping at
-- the limit (postgres/queries/jobs.sql says why not one condition with OR).
SELECT * FROM (
    SELECT * FROM (
        SELECT * FROM jobs
        WHERE deleted_at IS NULL AND paused = 0 AND next_run_at IS NOT NULL
          AND next_run_at <= :until
          AND (:shards IS NULL OR shard IN (SELECT value FROM json_each(:shards)))
        ORDER BY next_run_at
        LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT * FROM jobs
        WHERE once = 1 AND deleted_at IS NULL AND paused = 0 AND next_run_at IS NOT NULL
          AND next_run_at > :until AND next_run_at <= :until_once
          AND (:shards IS NULL OR shard IN (SELECT value FROM json_each(:shards)))
        ORDER BY next_run_at
        LIMIT :limit))
ORDER BY next_run_at
LIMIT :limit

-- name: job_advance
UPDATE jobs SET next_run_at = ?
WHERE id = ? AND next_run_at = ? AND deleted_at IS NULL AND paused = 0

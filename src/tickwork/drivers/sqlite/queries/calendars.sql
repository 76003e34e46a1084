-- name: calendar_insert
INSERT INTO calendars (name, document, version, created_at, updated_at) VALUES (?, ?, 1, ?, ?)

-- name: calendar_update
UPDATE calendars SET document = ?, version = version + 1, updated_at = ? WHERE name = ?

-- name: calendar_get
SELECT * FROM calendars WHERE name = ?

-- name: calendar_list
SELECT * FROM calendars ORDER BY name LIMIT ?

-- name: calendar_delete
DELETE FROM calendars WHERE name = ?

-- name: calendar_jobs
-- Only specs that name calendars have these keys (drivers/codec.py): instr() skips the rest
-- without parsing their JSON.
SELECT * FROM jobs
WHERE deleted_at IS NULL AND id > ? AND instr(spec, '"exclude":') > 0
  AND (EXISTS (SELECT 1 FROM json_each(jobs.spec, '$.schedule.exclude') WHERE value = ?)
       OR EXISTS (SELECT 1 FROM json_each(jobs.spec, '$.schedule.only') WHERE value = ?))
ORDER BY id
LIMIT ?

-- name: calendar_drop_occurrence
DELETE FROM occurrences
WHERE job_id = ? AND scheduled_at = ? AND state IN ('scheduled', 'queued') AND attempt = 0
  AND trigger = 'schedule'

-- name: calendar_job_next_run
UPDATE jobs SET next_run_at = ? WHERE id = ? AND deleted_at IS NULL

-- name: calendar_insert
INSERT INTO calendars (name, document, version, created_at, updated_at)
VALUES (%(name)s, %(document)s, 1, %(now)s, %(now)s)
ON CONFLICT (name) DO NOTHING
RETURNING *

-- name: calendar_update
UPDATE calendars SET document = %(document)s, version = version + 1, updated_at = %(now)s
WHERE name = %(name)s
RETURNING *

-- name: calendar_get
SELECT * FROM calendars WHERE name = %s

-- name: calendar_lock
SELECT * FROM calendars WHERE name = %s FOR UPDATE

-- name: calendar_list
SELECT * FROM calendars ORDER BY name COLLATE "C" LIMIT %s

-- name: calendar_delete
DELETE FROM calendars WHERE name = %s

-- name: calendar_jobs
-- Only specs that name calendars have these keys (drivers/codec.py): strpos() skips the rest
-- without parsing their JSON.
SELECT * FROM jobs
WHERE deleted_at IS NULL AND id > %(after)s AND strpos(spec, '"exclude":') > 0
  AND (spec::jsonb -> 'schedule' -> 'exclude' ? %(name)s
       OR spec::jsonb -> 'schedule' -> 'only' ? %(name)s)
ORDER BY id COLLATE "C"
LIMIT %(limit)s

-- name: calendar_drop_occurrences
DELETE FROM occurrences
WHERE job_id = %(job_id)s AND scheduled_at = ANY(%(drop)s::timestamptz[])
  AND state IN ('scheduled', 'queued') AND attempt = 0 AND trigger = 'schedule'

-- name: calendar_job_next_run
UPDATE jobs SET next_run_at = %(next_run_at)s WHERE id = %(job_id)s AND deleted_at IS NULL

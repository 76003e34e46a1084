-- name: audit_insert
INSERT INTO audit_log (created_at, actor, action, job_id, job_name, scheduled_at, details)
VALUES (%(now)s, %(actor)s, %(action)s, %(job_id)s,
        COALESCE(%(name)s, (SELECT name FROM jobs WHERE id = %(job_id)s)),
        %(scheduled_at)s, %(details)s)

-- name: audit_copy_created
-- One 'create' entry per job of a batch, sent with the jobs (their row, their creator, their
-- time). Read back from the rows just written instead (an INSERT ... SELECT by id), each
-- entry cost a probe of jobs by its key: a fifth of bulk creation's time.
COPY audit_log (created_at, actor, action, job_id, job_name) FROM STDIN (FORMAT BINARY)

-- name: audit_insert_created
-- One 'create' entry per job of a batch, read from the rows just written.
INSERT INTO audit_log (created_at, actor, action, job_id, job_name)
SELECT created_at, created_by, 'create', id, name FROM jobs WHERE id = ANY(%(ids)b::text[])

-- name: jobs_deleted_by_ref
SELECT * FROM jobs WHERE (id = %(ref)s OR name = %(ref)s) AND deleted_at IS NOT NULL
  AND (%(namespace)s::text IS NULL OR namespace = %(namespace)s::text)
ORDER BY deleted_at DESC
LIMIT 100

-- name: occurrence_for_control
SELECT * FROM occurrences WHERE job_id = %(job_id)s AND scheduled_at = %(scheduled_at)s
FOR UPDATE

-- name: attempt_close_running
-- Before occurrence_cancel_one (the row read locked): the attempt it stops gets its row, with
-- an end.
INSERT INTO attempts (job_id, scheduled_at, number, worker, queued_at, claimed_at, finished_at,
                      outcome, error)
SELECT o.job_id, o.scheduled_at, o.attempt, o.worker, o.due_at,
       COALESCE(o.claimed_at, %(now)s), %(now)s, 'failed', %(reason)s
FROM occurrences o
WHERE o.job_id = %(job_id)s AND o.scheduled_at = %(scheduled_at)s
  AND o.attempt = %(attempt)s AND o.state = 'running'
ON CONFLICT (job_id, scheduled_at, number) DO UPDATE
SET finished_at = excluded.finished_at, outcome = excluded.outcome, error = excluded.error
WHERE attempts.finished_at IS NULL

-- name: occurrence_cancel_one
UPDATE occurrences SET state = 'cancelled', finished_at = %(now)s, updated_at = %(now)s,
    lease_until = NULL, last_error = %(reason)s
WHERE job_id = %(job_id)s AND scheduled_at = %(scheduled_at)s
  AND state IN ('scheduled', 'queued', 'retrying', 'running')
RETURNING *

-- name: occurrence_retry
-- Back to retrying, due now: the next claim takes it as attempt n + 1 (a started run is never
-- skipped or missed, claiming.py). The job must not be deleted.
UPDATE occurrences SET state = 'retrying', due_at = %(now)s, updated_at = %(now)s,
    finished_at = NULL, lease_until = NULL, worker = NULL
WHERE job_id = %(job_id)s AND scheduled_at = %(scheduled_at)s
  AND state IN ('dead', 'crashed', 'cancelled')
  AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = occurrences.job_id AND j.deleted_at IS NULL)
RETURNING *

-- name: attempt_note
-- A note on an ended attempt, and on its run when the run ended with it.
WITH noted AS (
    UPDATE attempts
    SET error = CASE WHEN error IS NULL OR error = '' THEN %(note)s
                     ELSE error || '; ' || %(note)s END
    WHERE job_id = %(job_id)s AND scheduled_at = %(scheduled_at)s AND number = %(attempt)s
      AND outcome IS NOT NULL
    RETURNING job_id
), run AS (
    UPDATE occurrences
    SET last_error = CASE WHEN last_error IS NULL OR last_error = '' THEN %(note)s
                          ELSE last_error || '; ' || %(note)s END
    WHERE job_id = %(job_id)s AND scheduled_at = %(scheduled_at)s AND attempt = %(attempt)s
      AND state <> 'running' AND EXISTS (SELECT 1 FROM noted)
)
SELECT count(*) AS noted FROM noted

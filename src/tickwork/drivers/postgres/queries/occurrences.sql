-- name: occurrence_insert
-- Insert-if-absent in one statement for the whole batch; RETURNING tells what is new.
INSERT INTO occurrences (job_id, scheduled_at, due_at, queue, priority, state, max_attempts,
                         trigger, created_at, updated_at, finished_at, overlap)
SELECT u.job_id, u.scheduled_at, u.due_at, u.queue, u.priority, u.state, u.max_attempts,
       u.trigger, %(now)s, %(now)s, u.finished_at, u.overlap
FROM unnest(%(job_ids)b::text[], %(scheduled)b::timestamptz[], %(due)b::timestamptz[],
            %(queues)b::text[], %(priorities)b::integer[], %(states)b::text[],
            %(max_attempts)b::integer[], %(triggers)b::text[], %(finished)b::timestamptz[],
            %(overlaps)b::text[])
     AS u(job_id, scheduled_at, due_at, queue, priority, state, max_attempts, trigger,
          finished_at, overlap)
ON CONFLICT (job_id, scheduled_at) DO NOTHING
RETURNING queue

-- name: occurrence_get
SELECT * FROM occurrences WHERE job_id = %s AND scheduled_at = %s

-- name: occurrence_get_many
SELECT o.* FROM unnest(%b::text[], %b::timestamptz[]) WITH ORDINALITY AS v(job_id, scheduled_at, i)
JOIN occurrences o ON o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at
ORDER BY v.i

-- name: occurrence_complete
-- The whole batch in one statement, fenced on the attempt: a stale worker's result matches
-- no row. Keys are unique within one call (the driver splits repeats into rounds).
-- The fence's state comes from a sub-select, not a constant, so no partial index of running
-- rows matches it and each row is found by its key: matched, the plan fetched every running
-- row through occurrences_running, whose entries completions leave dead and bitmap scans never
-- kill, a read that grew with every run since the last vacuum (93 us a run at 100,000).
-- The attempt's row is written here, once, from the fenced row (occurrence_claim): who claimed
-- it and when, and when it was due (the claimed occurrence's due_at, sent by the worker, since
-- a retry moves the row's; without it, the row's). A plain INSERT: a row a claim wrote before
-- migration 017 makes it fail, and the driver then runs it again with ON CONFLICT, which
-- completes that row (postgres/occurrences.py). ON CONFLICT on every completion cost a tenth
-- of the statement (an arbiter probe and a confirmation record per row).
-- Each array costs the driver a Python step per element, so what the statement can derive is
-- not sent: the run's position in the batch (idx, from ORDINALITY), the occurrence's
-- finished_at (the attempt's end, when the next state is one of the terminal states, sent
-- once as a list), and queued_at for a run that does not retry (its row's due_at is still
-- the one claimed; the driver sends it only with a retry, which moves the row's).
WITH v AS (
    SELECT * FROM unnest(
        %(job_ids)b::text[], %(scheduled)b::timestamptz[], %(attempts)b::integer[],
        %(states)b::text[], %(due)b::timestamptz[], %(last_errors)b::text[],
        %(outcomes)b::text[], %(started)b::timestamptz[], %(ended)b::timestamptz[],
        %(outputs)b::text[], %(errors)b::text[], %(queued)b::timestamptz[]) WITH ORDINALITY
    AS v(job_id, scheduled_at, attempt, state, due_at, last_error, outcome, started_at,
         ended_at, output, error, queued_at, idx)
), done AS (
    UPDATE occurrences o
    SET state = v.state, due_at = COALESCE(v.due_at, o.due_at), lease_until = NULL,
        updated_at = %(now)s, last_error = v.last_error,
        finished_at = CASE WHEN v.state = ANY (%(terminal)s::text[]) THEN v.ended_at END
    FROM v
    WHERE o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at AND o.attempt = v.attempt
      AND o.state = (SELECT 'running'::text)
    RETURNING v.*, o.queue, o.worker, o.claimed_at, o.due_at AS row_due_at
), recorded AS (
    INSERT INTO attempts (job_id, scheduled_at, number, worker, queued_at, claimed_at,
                          started_at, finished_at, outcome, output, error)
    SELECT job_id, scheduled_at, attempt, worker, COALESCE(queued_at, row_due_at),
           COALESCE(claimed_at, started_at), started_at, ended_at, outcome, output, error
    FROM done
)
SELECT idx, state, queue FROM done

-- name: occurrence_heartbeat
-- now + max(extend_seconds, the job's timeout): a lease is never shorter than the timeout.
-- The state is a sub-select, as in occurrence_complete: each run found by its key, not among
-- every running row (and the dead entries) of occurrences_running.
UPDATE occurrences o
SET lease_until = GREATEST(o.lease_until, %(now)s + make_interval(secs => GREATEST(
        %(extend)s, COALESCE((SELECT j.timeout_seconds FROM jobs j WHERE j.id = o.job_id), 0)))),
    updated_at = %(now)s
FROM unnest(%(job_ids)b::text[], %(scheduled)b::timestamptz[], %(attempts)b::integer[])
     AS v(job_id, scheduled_at, attempt)
WHERE o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at AND o.attempt = v.attempt
  AND o.state = (SELECT 'running'::text) AND o.worker = %(worker)s
RETURNING o.job_id, o.scheduled_at, o.attempt

-- name: occurrence_release
-- Back to waiting, due now, attempt counter and attempt row undone (G10). The state is a
-- sub-select, as in occurrence_complete.
WITH released AS (
    UPDATE occurrences o
    SET state = CASE WHEN o.attempt > 1 THEN 'retrying' ELSE 'scheduled' END,
        attempt = o.attempt - 1, due_at = %(now)s, lease_until = NULL, worker = NULL,
        updated_at = %(now)s
    FROM unnest(%(job_ids)b::text[], %(scheduled)b::timestamptz[], %(attempts)b::integer[])
         AS v(job_id, scheduled_at, attempt)
    WHERE o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at AND o.attempt = v.attempt
      AND o.state = (SELECT 'running'::text) AND o.worker = %(worker)s
    RETURNING o.job_id, o.scheduled_at, o.attempt + 1 AS number, o.queue
), undone AS (
    -- A running attempt has no row (occurrence_claim), unless claimed before migration 017.
    DELETE FROM attempts a USING released r
    WHERE a.job_id = r.job_id AND a.scheduled_at = r.scheduled_at AND a.number = r.number
)
SELECT queue FROM released

-- name: occurrence_expired
SELECT o.job_id, o.scheduled_at, o.attempt, o.max_attempts, o.worker, o.queue, o.trigger,
       j.spec AS job_spec, j.version AS job_version
FROM occurrences o JOIN jobs j ON j.id = o.job_id
WHERE o.state = 'running'
  AND (o.lease_until < %(now)s
       OR (%(all_but)s::text IS NOT NULL AND o.worker IS DISTINCT FROM %(all_but)s::text))
ORDER BY o.lease_until
LIMIT %(limit)s
FOR UPDATE OF o SKIP LOCKED

-- name: occurrence_rescue
-- The rows were read locked (occurrence_expired, same transaction): `before` sees them as they
-- were, for the attempt's row (the rescue moves due_at).
WITH v AS (
    SELECT * FROM unnest(%(job_ids)b::text[], %(scheduled)b::timestamptz[],
                         %(attempts)b::integer[], %(states)b::text[],
                         %(finished)b::timestamptz[], %(errors)b::text[])
         AS v(job_id, scheduled_at, attempt, state, finished_at, error)
), before AS (
    SELECT o.job_id, o.scheduled_at, o.worker, o.due_at, o.claimed_at
    FROM v JOIN occurrences o ON o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at
), rescued AS (
    UPDATE occurrences o
    SET state = v.state, due_at = %(now)s, lease_until = NULL, updated_at = %(now)s,
        finished_at = v.finished_at, last_error = v.error
    FROM v
    WHERE o.job_id = v.job_id AND o.scheduled_at = v.scheduled_at AND o.attempt = v.attempt
      AND o.state = 'running'
    RETURNING o.job_id, o.scheduled_at, o.attempt, v.error
)
INSERT INTO attempts (job_id, scheduled_at, number, worker, queued_at, claimed_at, finished_at,
                      outcome, error)
SELECT r.job_id, r.scheduled_at, r.attempt, b.worker, b.due_at,
       COALESCE(b.claimed_at, %(now)s), %(now)s, 'crashed', r.error
FROM rescued r JOIN before b ON b.job_id = r.job_id AND b.scheduled_at = r.scheduled_at
ON CONFLICT (job_id, scheduled_at, number) DO UPDATE
SET finished_at = excluded.finished_at, outcome = excluded.outcome, error = excluded.error

-- name: attempt_close_running_of_job
-- Before occurrence_cancel_job: the attempts it stops get their row, with an end.
INSERT INTO attempts (job_id, scheduled_at, number, worker, queued_at, claimed_at, finished_at,
                      outcome, error)
SELECT o.job_id, o.scheduled_at, o.attempt, o.worker, o.due_at,
       COALESCE(o.claimed_at, %(now)s), %(now)s, 'failed', %(reason)s
FROM occurrences o
WHERE o.job_id = %(job_id)s AND o.state = 'running'
ON CONFLICT (job_id, scheduled_at, number) DO UPDATE
SET finished_at = excluded.finished_at, outcome = excluded.outcome, error = excluded.error
WHERE attempts.finished_at IS NULL

-- name: occurrence_cancel_job
UPDATE occurrences
SET state = 'cancelled', finished_at = %(now)s, updated_at = %(now)s, lease_until = NULL,
    last_error = %(reason)s
WHERE job_id = %(job_id)s AND state IN ('scheduled', 'queued', 'retrying', 'running')

-- name: occurrence_next_due
-- The same eligibility as occurrence_candidates, so a worker never wakes for what it cannot claim.
-- Read in the order of occurrences_due (queue, priority DESC, due_at): its priorities are
-- skipped through one by one (a loose index scan), and each one's waiting rows are read from
-- the earliest until one is eligible, so the cost is the number of priorities, not of waiting
-- rows. min(due_at) over the queue read every waiting row instead: 27 ms a question with a
-- burst of 20,000 waiting, asked by every idle worker at every wake-up.
WITH RECURSIVE levels(priority) AS (
    (SELECT o.priority FROM occurrences o
     WHERE o.queue = %(queue)s AND o.state IN ('scheduled', 'queued', 'retrying')
     ORDER BY o.priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT o.priority FROM occurrences o
            WHERE o.queue = %(queue)s AND o.state IN ('scheduled', 'queued', 'retrying')
              AND o.priority < l.priority
            ORDER BY o.priority DESC LIMIT 1)
    FROM levels l WHERE l.priority IS NOT NULL
)
SELECT min(first.due_at) AS due_at FROM levels l CROSS JOIN LATERAL (
    SELECT o.due_at FROM occurrences o
    WHERE o.queue = %(queue)s AND o.priority = l.priority
      AND o.state IN ('scheduled', 'queued', 'retrying')
      AND (SELECT NOT j.paused AND j.deleted_at IS NULL
                  AND NOT (COALESCE(o.overlap, j.overlap) = 'buffer_all' AND (
                      EXISTS (SELECT 1 FROM occurrences r
                              WHERE r.job_id = o.job_id AND r.state = 'running')
                      OR (o.attempt = 0 AND o.state <> 'retrying' AND EXISTS (
                          SELECT 1 FROM occurrences r
                          WHERE r.job_id = o.job_id AND r.state = 'retrying'))))
                  AND (o.limited_at IS NULL OR j.namespace <> ALL (ARRAY(
                      SELECT nq.name FROM namespaces nq
                      LEFT JOIN namespace_runs nr ON nr.namespace = nq.name
                           AND nr.hour = %(hour)s
                      WHERE nq.max_runs_per_hour IS NOT NULL
                        AND COALESCE(nr.runs, 0) >= nq.max_runs_per_hour)))
           FROM jobs j WHERE j.id = o.job_id)
    ORDER BY o.due_at
    LIMIT 1
) first
WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = %(queue)s AND q.paused)

-- name: attempt_list
-- The ended attempts' rows, and the running attempt from its occurrence (its row is written
-- when it ends; one claimed before migration 017 has its row already).
SELECT job_id, scheduled_at, number, worker, queued_at, claimed_at, started_at, finished_at,
       outcome, output, error
FROM attempts WHERE job_id = %(job_id)s AND scheduled_at = %(scheduled_at)s
UNION ALL
SELECT o.job_id, o.scheduled_at, o.attempt, o.worker, o.due_at, o.claimed_at, NULL, NULL,
       NULL, NULL, NULL
FROM occurrences o
WHERE o.job_id = %(job_id)s AND o.scheduled_at = %(scheduled_at)s AND o.state = 'running'
  AND o.claimed_at IS NOT NULL AND NOT EXISTS (
      SELECT 1 FROM attempts a
      WHERE a.job_id = o.job_id AND a.scheduled_at = o.scheduled_at AND a.number = o.attempt)
ORDER BY number

-- name: occurrence_insert_chained
-- One run a chain triggered (drivers/chaining.py): insert-if-absent; no row back means the
-- instant is taken, and the caller reads whose it is (occurrence_upstream).
INSERT INTO occurrences (job_id, scheduled_at, due_at, queue, priority, state, max_attempts,
                         trigger, created_at, updated_at, upstream)
VALUES (%(job_id)s, %(scheduled)s, %(now)s, %(queue)s, %(priority)s, 'scheduled',
        %(max_attempts)s, 'chain', %(now)s, %(now)s, %(upstream)s)
ON CONFLICT (job_id, scheduled_at) DO NOTHING
RETURNING queue

-- name: occurrence_upstream
SELECT trigger, upstream FROM occurrences WHERE job_id = %s AND scheduled_at = %s

-- name: jobs_by_names
-- The jobs chains name, each in the namespace of the job that names it (upstream_id).
SELECT j.id, j.name, j.version, j.spec, u.id AS upstream_id
FROM jobs j JOIN jobs u ON u.namespace = j.namespace
WHERE j.name = ANY(%s::text[]) AND u.id = ANY(%s::text[]) AND j.deleted_at IS NULL

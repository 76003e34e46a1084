-- name: alert_insert_firing
-- The unique index on firing alerts makes a racing second insert a no-op.
INSERT INTO alerts (id, job_id, job_name, condition, state, detail, notified, fired_at,
                    updated_at)
VALUES (%(id)s, %(job_id)s, %(job_name)s, %(condition)s, 'firing', %(detail)s,
        NOT coalesce((SELECT max(fired_at) FROM alerts
                      WHERE job_id = %(job_id)s AND condition = %(condition)s AND notified)
                     > %(quiet_after)s, false),
        %(now)s, %(now)s)
ON CONFLICT (job_id, condition) WHERE state = 'firing' DO NOTHING
RETURNING *

-- name: alert_resolve
UPDATE alerts SET state = 'resolved', resolved_at = %(now)s, updated_at = %(now)s,
    detail = %(detail)s
WHERE job_id = %(job_id)s AND condition = %(condition)s AND state = 'firing'
RETURNING *

-- name: alert_list
SELECT * FROM alerts
WHERE (%(job_id)s::text IS NULL OR job_id = %(job_id)s)
  AND (%(state)s::text IS NULL OR state = %(state)s)
  AND (%(before_at)s::timestamptz IS NULL OR (fired_at, id) < (%(before_at)s, %(before_id)s))
ORDER BY fired_at DESC, id DESC
LIMIT %(limit)s

-- name: deliveries_of
SELECT * FROM alert_deliveries WHERE alert_id = ANY(%s) ORDER BY created_at, event, channel

-- name: delivery_claim
UPDATE alert_deliveries d
SET attempts = d.attempts + 1, next_attempt_at = %(until)s
FROM (SELECT id FROM alert_deliveries
      WHERE state = 'pending' AND next_attempt_at <= %(now)s
      ORDER BY next_attempt_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) due
WHERE d.id = due.id
-- The job's namespace: the channels' secrets resolve there ('' once the job is gone: none does).
RETURNING d.*, COALESCE((SELECT j.namespace FROM alerts al JOIN jobs j ON j.id = al.job_id
                         WHERE al.id = d.alert_id), '') AS job_namespace

-- name: delivery_finish
UPDATE alert_deliveries
SET state = %(state)s, last_error = %(error)s,
    next_attempt_at = coalesce(%(retry_at)s, next_attempt_at), finished_at = %(finished_at)s
WHERE id = %(id)s AND attempts = %(attempt)s AND state = 'pending'

-- name: alert_facts
SELECT
  (SELECT coalesce(json_agg(json_build_array(r.scheduled_at, r.state)), '[]'::json)
   FROM (SELECT scheduled_at, state FROM occurrences
         WHERE job_id = %(job_id)s AND state IN ('succeeded', 'dead', 'crashed', 'missed')
         ORDER BY scheduled_at DESC LIMIT %(recent)s) r)::text AS recent,
  (SELECT max(coalesce(finished_at, updated_at)) FROM occurrences
   WHERE job_id = %(job_id)s AND state = 'succeeded') AS last_success_at,
  (SELECT min(due_at) FROM occurrences
   WHERE job_id = %(job_id)s AND state IN ('scheduled', 'queued') AND attempt = 0
     AND due_at <= %(late_before)s) AS late_since,
  (SELECT min(o.claimed_at) FROM occurrences o
   WHERE o.job_id = %(job_id)s AND o.state = 'running'
     AND o.claimed_at <= %(running_before)s) AS running_since,
  (SELECT coalesce(json_agg(json_build_array(f.scheduled_at, f.state)), '[]'::json)
   FROM (SELECT scheduled_at, state FROM occurrences
         WHERE job_id = %(job_id)s AND state IN ('dead', 'crashed', 'missed')
           AND coalesce(finished_at, updated_at) >= %(ended_since)s
         ORDER BY coalesce(finished_at, updated_at) DESC LIMIT 10) f)::text AS failed_since

-- name: alert_jobs
-- The live jobs that name alerts, through the index of exactly those (jobs_alerting).
SELECT * FROM jobs
WHERE deleted_at IS NULL AND strpos(spec, '"alerts":') > 0 AND id > %(after)s
  AND (%(shards)s::integer[] IS NULL OR shard = ANY(%(shards)s::integer[]))
ORDER BY id LIMIT %(limit)s

-- name: alert_jobs_every
-- Every live job: alert_defaults gives alerts to jobs that name none.
SELECT * FROM jobs
WHERE deleted_at IS NULL AND id > %(after)s
  AND (%(shards)s::integer[] IS NULL OR shard = ANY(%(shards)s::integer[]))
ORDER BY id LIMIT %(limit)s

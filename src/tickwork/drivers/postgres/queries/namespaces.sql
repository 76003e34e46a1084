-- name: namespace_list
-- Every namespace with quotas, live jobs or active tokens (or only %(name)s, named or not),
-- with its live jobs and the attempts its jobs started since %(since)s: for a namespace with an
-- hourly quota, the count its claims keep for %(hour)s (what the quota is enforced on).
WITH names AS (
    SELECT %(name)s::text AS name WHERE %(name)s::text IS NOT NULL
    UNION SELECT name FROM namespaces WHERE %(name)s::text IS NULL
    UNION SELECT namespace FROM jobs WHERE deleted_at IS NULL AND %(name)s::text IS NULL
    UNION SELECT namespace FROM api_tokens
          WHERE namespace IS NOT NULL AND revoked_at IS NULL AND %(name)s::text IS NULL
)
SELECT n.name, q.max_jobs, q.max_runs_per_hour, q.max_payload_bytes,
       CASE WHEN %(quotas_only)s AND q.max_jobs IS NULL THEN 0
            ELSE (SELECT count(*) FROM jobs j
                  WHERE j.namespace = n.name AND j.deleted_at IS NULL) END AS jobs,
       CASE WHEN q.max_runs_per_hour IS NOT NULL
            THEN COALESCE((SELECT r.runs FROM namespace_runs r
                           WHERE r.namespace = n.name AND r.hour = %(hour)s), 0)
            WHEN %(quotas_only)s THEN 0
            ELSE (SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id
                  WHERE j.namespace = n.name AND a.claimed_at >= %(since)s)
                 + (SELECT count(*) FROM occurrences o JOIN jobs j ON j.id = o.job_id
                    WHERE j.namespace = n.name AND o.state = 'running'
                      AND o.claimed_at >= %(since)s AND NOT EXISTS (
                          SELECT 1 FROM attempts a WHERE a.job_id = o.job_id
                            AND a.scheduled_at = o.scheduled_at AND a.number = o.attempt))
            END AS runs
FROM names n LEFT JOIN namespaces q ON q.name = n.name
ORDER BY n.name COLLATE "C"

-- name: namespace_set
INSERT INTO namespaces (name, max_jobs, max_runs_per_hour, max_payload_bytes, created_at,
                        updated_at)
VALUES (%(name)s, %(max_jobs)s, %(max_runs_per_hour)s, %(max_payload_bytes)s, %(now)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET max_jobs = excluded.max_jobs,
    max_runs_per_hour = excluded.max_runs_per_hour,
    max_payload_bytes = excluded.max_payload_bytes, updated_at = excluded.updated_at

-- name: namespace_runs_seed
-- A quota set (or set again) on runs per hour starts from the attempts the namespace's jobs
-- started this hour (ended ones have their row; running ones are read from their occurrence);
-- never below what claims have counted already.
INSERT INTO namespace_runs (namespace, hour, runs)
SELECT %(name)s::text, %(hour)s::timestamptz, count(*)
FROM (SELECT a.job_id, a.claimed_at FROM attempts a
      UNION ALL
      SELECT o.job_id, o.claimed_at FROM occurrences o
      WHERE o.state = 'running' AND NOT EXISTS (
          SELECT 1 FROM attempts a WHERE a.job_id = o.job_id
            AND a.scheduled_at = o.scheduled_at AND a.number = o.attempt)) a
JOIN jobs j ON j.id = a.job_id
WHERE j.namespace = %(name)s::text AND a.claimed_at >= %(hour)s::timestamptz
  AND a.claimed_at < %(hour)s::timestamptz + interval '1 hour'
ON CONFLICT (namespace, hour) DO UPDATE
SET runs = GREATEST(namespace_runs.runs, excluded.runs)

-- name: secret_names
-- The names of the namespace's secrets: a job's references are checked in its own namespace
-- when it is created or changed. Never a value.
SELECT name FROM secrets WHERE namespace = %s

-- name: namespace_quotas
-- One namespace's quotas (no row: none set), for a creation on a caller's own connection.
SELECT max_jobs, max_runs_per_hour, max_payload_bytes FROM namespaces WHERE name = %s

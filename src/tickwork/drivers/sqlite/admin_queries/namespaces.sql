-- name: namespace_list
-- Every namespace with quotas, live jobs or active tokens (or only :name, named or not), with
-- its live jobs and the attempts its jobs started since :since: for a namespace with an hourly
-- quota, the count its claims keep for :hour (what the quota is enforced on). With
-- :quotas_only, counted only where a quota needs them (a check before a write).
WITH names AS (
    SELECT :name AS name WHERE :name IS NOT NULL
    UNION SELECT name FROM namespaces WHERE :name IS NULL
    UNION SELECT namespace FROM jobs WHERE deleted_at IS NULL AND :name IS NULL
    UNION SELECT namespace FROM api_tokens
          WHERE namespace IS NOT NULL AND revoked_at IS NULL AND :name IS NULL
)
SELECT n.name, q.max_jobs, q.max_runs_per_hour, q.max_payload_bytes,
       CASE WHEN :quotas_only AND q.max_jobs IS NULL THEN 0
            ELSE (SELECT count(*) FROM jobs j
                  WHERE j.namespace = n.name AND j.deleted_at IS NULL) END AS jobs,
       CASE WHEN q.max_runs_per_hour IS NOT NULL
            THEN COALESCE((SELECT r.runs FROM namespace_runs r
                           WHERE r.namespace = n.name AND r.hour = :hour), 0)
            WHEN :quotas_only THEN 0
            ELSE (SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id
                  WHERE j.namespace = n.name AND a.claimed_at >= :since) END AS runs
FROM names n LEFT JOIN namespaces q ON q.name = n.name
ORDER BY n.name

-- name: namespace_set
INSERT INTO namespaces (name, max_jobs, max_runs_per_hour, max_payload_bytes, created_at,
                        updated_at)
VALUES (:name, :max_jobs, :max_runs_per_hour, :max_payload_bytes, :now, :now)
ON CONFLICT (name) DO UPDATE SET max_jobs = excluded.max_jobs,
    max_runs_per_hour = excluded.max_runs_per_hour,
    max_payload_bytes = excluded.max_payload_bytes, updated_at = excluded.updated_at

-- name: namespace_runs_seed
-- A quota set (or set again) on runs per hour starts from the attempts the namespace's jobs
-- started this hour; never below what claims have counted already.
INSERT INTO namespace_runs (namespace, hour, runs)
SELECT :name, :hour, count(*)
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE j.namespace = :name AND a.claimed_at >= :hour AND a.claimed_at < :hour + 3600000000
ON CONFLICT (namespace, hour) DO UPDATE SET runs = MAX(runs, excluded.runs)

-- name: secret_names
-- The names of the namespace's secrets: a job's references are checked in its own namespace
-- when it is created or changed. Never a value.
SELECT name FROM secrets WHERE namespace = ?

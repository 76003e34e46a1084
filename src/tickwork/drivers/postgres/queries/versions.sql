-- name: job_version_take
-- The version becomes the name's last one (in its namespace) if it is newer; a row back means
-- it did.
INSERT INTO job_versions (namespace, name, version, updated_at) VALUES (%s, %s, %s, %s)
ON CONFLICT (namespace, name) DO UPDATE
    SET version = EXCLUDED.version, updated_at = EXCLUDED.updated_at
WHERE job_versions.version < EXCLUDED.version
RETURNING version

-- name: job_version_get
SELECT version FROM job_versions WHERE namespace = %s AND name = %s

-- name: job_version_take
-- The version becomes the name's last one (in its namespace) if it is newer; a row back means
-- it did.
INSERT INTO job_versions (namespace, name, version, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (namespace, name) DO UPDATE
    SET version = excluded.version, updated_at = excluded.updated_at
WHERE job_versions.version < excluded.version
RETURNING version

-- name: job_version_get
SELECT version FROM job_versions WHERE namespace = ? AND name = ?

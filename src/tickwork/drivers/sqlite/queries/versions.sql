-- name: job_version_take
-- The version becomes the name's last one if it is newer; a row back means it did.
INSERT INTO job_versions (name, version, updated_at) VALUES (?, ?, ?)
ON CONFLICT (name) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at
WHERE job_versions.version < excluded.version
RETURNING version

-- name: job_version_get
SELECT version FROM job_versions WHERE name = ?

-- Namespaces (tenants): every job and API token belongs to one; existing ones to 'default'.
-- Job names are unique per namespace. Instants are integer microseconds since the Unix epoch.
ALTER TABLE jobs ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS jobs_name;
CREATE UNIQUE INDEX jobs_namespace_name ON jobs (namespace, name) WHERE deleted_at IS NULL;
-- Lookups by name across namespaces (an admin without a namespace) still read an index.
CREATE INDEX jobs_name_live ON jobs (name) WHERE deleted_at IS NULL;

-- A token with a namespace sees and changes only that namespace; NULL: every namespace.
ALTER TABLE api_tokens ADD COLUMN namespace TEXT;

-- A namespace gets a row when its quotas are first set; NULL quotas are unlimited.
CREATE TABLE IF NOT EXISTS namespaces (
    name              TEXT PRIMARY KEY,
    max_jobs          INTEGER,
    max_runs_per_hour INTEGER,
    max_payload_bytes INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) WITHOUT ROWID;

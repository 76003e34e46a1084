-- A queue and a limit key may be owned by one namespace: its tokens pause the queue and set
-- the limits, and jobs of other namespaces cannot name it. NULL: shared by every namespace,
-- as every queue and key was before.
ALTER TABLE queues ADD COLUMN namespace TEXT;
ALTER TABLE limit_keys ADD COLUMN namespace TEXT;

-- Job names are unique per namespace, so the last version applied to a name is kept per
-- (namespace, name). The versions recorded before are of 'default''s jobs. SQLite cannot
-- change a primary key in place: the table is copied.
CREATE TABLE job_versions_by_namespace (
    namespace  TEXT NOT NULL DEFAULT 'default',
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
);
INSERT INTO job_versions_by_namespace (namespace, name, version, updated_at)
    SELECT 'default', name, version, updated_at FROM job_versions;
DROP TABLE job_versions;
ALTER TABLE job_versions_by_namespace RENAME TO job_versions;

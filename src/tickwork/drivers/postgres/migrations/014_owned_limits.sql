-- A queue and a limit key may be owned by one namespace: its tokens pause the queue and set
-- the limits, and jobs of other namespaces cannot name it. NULL: shared by every namespace,
-- as every queue and key was before.
ALTER TABLE queues ADD COLUMN namespace text;
ALTER TABLE limit_keys ADD COLUMN namespace text;

-- Job names are unique per namespace, so the last version applied to a name is kept per
-- (namespace, name). The versions recorded before are of 'default''s jobs.
ALTER TABLE job_versions ADD COLUMN namespace text NOT NULL DEFAULT 'default';
ALTER TABLE job_versions DROP CONSTRAINT job_versions_pkey;
ALTER TABLE job_versions ADD PRIMARY KEY (namespace, name);

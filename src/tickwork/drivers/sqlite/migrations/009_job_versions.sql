-- The last version applied to each job name by a versioned change (a command consumed from a
-- stream, docs/streams.md): a change with a version not newer than this one is refused, so an
-- older command never overwrites a newer one. Kept by name, and after the job is deleted, so a
-- late copy of an older command cannot bring a deleted job back. updated_at: microseconds.
CREATE TABLE job_versions (
    name TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

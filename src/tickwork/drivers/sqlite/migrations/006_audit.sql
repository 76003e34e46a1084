-- Who created and last changed each job, and the audit trail of every change to a job or to
-- one of its runs, written in the transaction of the change. Instants are integer
-- microseconds since the Unix epoch, UTC.
ALTER TABLE jobs ADD COLUMN created_by TEXT;
ALTER TABLE jobs ADD COLUMN updated_by TEXT;

CREATE TABLE audit_log (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at   INTEGER NOT NULL,
    actor        TEXT,                   -- an API token's name, an OS user; NULL if unknown
    action       TEXT NOT NULL,          -- create, update, pause, resume, delete, trigger, ...
    job_id       TEXT,
    job_name     TEXT,
    scheduled_at INTEGER,                -- the run, for trigger, cancel and retry
    details      TEXT                    -- JSON: an update's {field: {before, after}}, ...
);
CREATE INDEX audit_log_job ON audit_log (job_id, id);
CREATE INDEX audit_log_created ON audit_log (created_at, id);
-- The runs of a deleted job are found by its name too.
CREATE INDEX jobs_deleted_name ON jobs (name) WHERE deleted_at IS NOT NULL;

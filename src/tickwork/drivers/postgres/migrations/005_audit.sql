-- Who created and last changed each job, and the audit trail of every change to a job or to
-- one of its runs, written in the transaction of the change.
ALTER TABLE jobs ADD COLUMN created_by text, ADD COLUMN updated_by text;

CREATE TABLE audit_log (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at   timestamptz NOT NULL,
    actor        text,                   -- an API token's name, an OS user; NULL if unknown
    action       text NOT NULL,          -- create, update, pause, resume, delete, trigger, ...
    job_id       text,
    job_name     text,
    scheduled_at timestamptz,            -- the run, for trigger, cancel and retry
    details      text                    -- JSON: an update's {field: {before, after}}, ...
);
CREATE INDEX audit_log_job ON audit_log (job_id, id);
CREATE INDEX audit_log_created ON audit_log (created_at, id);
-- The runs of a deleted job are found by its name too.
CREATE INDEX jobs_deleted_name ON jobs (name) WHERE deleted_at IS NOT NULL;

-- Enqueue and purge.
-- job_dedupe: a dedupe key, held by the job an enqueue created until expires_at; the primary
--             key is what makes concurrent enqueues with one key create one job.
-- jobs_finished, jobs_deleted: what the pruner's purge of old definitions looks through.
CREATE TABLE job_dedupe (
    key        text PRIMARY KEY,
    job_id     text NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX job_dedupe_expires ON job_dedupe (expires_at);
CREATE INDEX job_dedupe_job ON job_dedupe (job_id);
CREATE INDEX jobs_finished ON jobs (updated_at)
    WHERE deleted_at IS NULL AND next_run_at IS NULL AND NOT paused;
CREATE INDEX jobs_deleted ON jobs (deleted_at) WHERE deleted_at IS NOT NULL;

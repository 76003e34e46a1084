-- One-off jobs (schedule type "at") are planned further ahead than recurring ones
-- (planner_one_off_horizon_seconds): a one-off job has one run, so planning it early costs
-- nothing more, and a burst of them due at one instant is planned before it is due instead
-- of in the seconds around it. `once` says which jobs they are, written with the spec;
-- jobs_due_once finds those due within the longer horizon without reading the recurring ones
-- (its predicate is job_due's own, term for term, as SQLite asks of a partial index).
ALTER TABLE jobs ADD COLUMN once INTEGER NOT NULL DEFAULT 0;

UPDATE jobs SET once = 1 WHERE json_extract(spec, '$.schedule.type') = 'at';

CREATE INDEX jobs_due_once ON jobs (next_run_at)
    WHERE once = 1 AND deleted_at IS NULL AND paused = 0 AND next_run_at IS NOT NULL;

-- One-off jobs (schedule type "at") are planned further ahead than recurring ones
-- (planner_one_off_horizon_seconds): a one-off job has one run, so planning it early costs
-- nothing more, and a burst of them due at one instant is planned before it is due instead
-- of in the seconds around it. `once` says which jobs they are, written with the spec;
-- jobs_due_once finds those due within the longer horizon without reading the recurring ones.
ALTER TABLE jobs ADD COLUMN once boolean NOT NULL DEFAULT false;

UPDATE jobs SET once = true
WHERE spec::jsonb -> 'schedule' ->> 'type' = 'at';

CREATE INDEX jobs_due_once ON jobs (next_run_at)
    WHERE once AND deleted_at IS NULL AND NOT paused AND next_run_at IS NOT NULL;

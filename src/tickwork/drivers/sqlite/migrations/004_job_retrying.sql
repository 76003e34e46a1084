-- Claims read, per job, the occurrences that started and wait to run again: under an overlap
-- policy they hold back the job's newer occurrences (occurrence_unfinished_of_job).
CREATE INDEX IF NOT EXISTS occurrences_job_retrying ON occurrences (job_id)
    WHERE state = 'retrying';

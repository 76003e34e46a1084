-- A job's started runs that are not finished (running, or waiting to retry) in one partial
-- index by job, in place of one for each state. The overlap question of every claim reads
-- it; with a partial index of running rows by job beside two others of running rows (by queue,
-- by lease), a prepared statement's generic plan made on a new table scanned every running
-- row through one of those instead (740 index entries read per claim in W4), and kept doing
-- so as the table grew. No other index has this predicate, so no plan can take another for it.
CREATE INDEX occurrences_job_unfinished ON occurrences (job_id)
    WHERE state IN ('running', 'retrying');
DROP INDEX occurrences_job_running;
DROP INDEX occurrences_job_retrying;

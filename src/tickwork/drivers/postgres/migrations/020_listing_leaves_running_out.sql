-- The index that lists runs by time leaves running runs out. Every claim and every completion
-- rewrites its occurrence's row (its state is in the partial indexes' predicates, so the
-- update is never HOT), and each new row version gets an entry in every index whose predicate
-- it meets: indexed without a predicate, occurrences_scheduled took two entries a run, one of
-- them at the claim, a seventh of PostgreSQL's CPU over a burst of claims and completions.
-- Running runs, as many as the workers run at once, are listed apart (occurrence_list).
DROP INDEX occurrences_scheduled;
CREATE INDEX occurrences_scheduled ON occurrences (scheduled_at, job_id)
    WHERE state <> 'running';

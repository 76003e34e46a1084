-- When a worker's queue runs dry it asks when the next occurrence comes due (occurrence_next_due).
-- Read in due order from this index, the first eligible entry answers; without it the question
-- read every waiting occurrence of the queue (50 ms with 100,000 waiting).
CREATE INDEX IF NOT EXISTS occurrences_next_due ON occurrences (queue, due_at)
    WHERE state IN ('scheduled', 'queued', 'retrying');

-- An attempt's row is written once, when the attempt ends (completion, rescue, cancel), not
-- inserted by the claim and updated by the completion: the update was a new row version and
-- two index entries per run (attempts_finished indexes finished_at, so it is never HOT).
-- Until it ends, a running attempt is read from its occurrence (attempt_list), which keeps
-- when it was claimed. A running attempt claimed before this migration keeps its row; the
-- statements that end an attempt write it with ON CONFLICT, so such a row is completed.
ALTER TABLE occurrences ADD COLUMN claimed_at timestamptz;

UPDATE occurrences o SET claimed_at = a.claimed_at
FROM attempts a
WHERE o.state = 'running' AND a.job_id = o.job_id AND a.scheduled_at = o.scheduled_at
  AND a.number = o.attempt;

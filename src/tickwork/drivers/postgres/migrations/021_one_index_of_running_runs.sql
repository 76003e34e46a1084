-- One index of running runs, by queue and lease, in place of two (by lease; by queue, from
-- migration 009): each claim writes an entry to every index of running runs, so the second
-- was a fifth of a claim's index entries. The rescuer's look for expired leases reads it whole
-- (as many entries as runs run at once, and those completions left behind since the last
-- vacuum, as it did before), a limited queue's claim counts its running runs by queue and
-- lease, and the list of queues with running runs skips through it by queue.
DROP INDEX occurrences_queue_running;
DROP INDEX occurrences_running;
CREATE INDEX occurrences_running ON occurrences (queue, lease_until) WHERE state = 'running';

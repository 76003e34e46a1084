-- name: partition_lock
-- Schedulers create and drop partitions one at a time.
SELECT pg_advisory_xact_lock(1953063787, 1885434484)

-- name: partition_list
SELECT c.relname AS name FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname = 'attempts' AND p.relnamespace = current_schema()::regnamespace
  AND c.relname LIKE 'attempts\_p%%'

-- name: partition_create
-- Rows the default partition caught for this day move into the new partition first, or
-- attaching it would fail.
LOCK TABLE attempts_default IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE {part} (LIKE attempts INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO {part} SELECT * FROM attempts_default WHERE scheduled_at >= {lo} AND scheduled_at < {hi};
DELETE FROM attempts_default WHERE scheduled_at >= {lo} AND scheduled_at < {hi};
ALTER TABLE attempts ATTACH PARTITION {part} FOR VALUES FROM ({lo}) TO ({hi})

-- name: partition_drop
DROP TABLE {part}

-- name: attempts_default_prune
DELETE FROM attempts_default WHERE ctid IN (
    SELECT ctid FROM attempts_default WHERE scheduled_at < %(before)s LIMIT %(limit)s)

-- name: occurrences_prune
-- Finished runs only: a waiting or running occurrence stays, however old.
DELETE FROM occurrences WHERE ctid IN (
    SELECT ctid FROM occurrences
    WHERE finished_at < %(before)s
      AND state IN ('succeeded', 'dead', 'crashed', 'missed', 'skipped_overlap', 'cancelled')
    LIMIT %(limit)s)

-- name: audit_prune
DELETE FROM audit_log WHERE id IN (
    SELECT id FROM audit_log WHERE created_at < %(before)s ORDER BY created_at, id
    LIMIT %(limit)s)

-- name: namespace_runs_prune
-- Hours of namespace runs wholly before the history kept: a claim only reads its own hour.
DELETE FROM namespace_runs WHERE hour + interval '1 hour' <= %(before)s

-- name: attempts_partition_prune
-- A retention shorter than a day: attempts older than it inside a partition kept, by the
-- finished_at index (a run finishes after it is scheduled), those of unfinished runs aside.
DELETE FROM {part} WHERE ctid IN (
    SELECT a.ctid FROM {part} a
    WHERE a.finished_at < %(before)s AND a.scheduled_at < %(before)s
      AND NOT EXISTS (
          SELECT 1 FROM occurrences o
          WHERE o.job_id = a.job_id AND o.scheduled_at = a.scheduled_at
            AND o.state NOT IN ('succeeded', 'dead', 'crashed', 'missed', 'skipped_overlap',
                                'cancelled'))
    LIMIT %(limit)s)

-- name: autovacuum_settings
-- Whether the server vacuums on its own, and the thresholds it would use: with autovacuum off
-- tickwork applies them to its own tables.
SELECT name, setting FROM pg_settings
WHERE name IN ('autovacuum', 'autovacuum_vacuum_threshold', 'autovacuum_vacuum_scale_factor',
               'autovacuum_analyze_threshold', 'autovacuum_analyze_scale_factor')

-- name: vacuum_lock
-- One vacuuming scheduler at a time (a session lock, released at once after the pass).
SELECT pg_try_advisory_lock(hashtext('tickwork.vacuum')) AS locked

-- name: vacuum_unlock
SELECT pg_advisory_unlock(hashtext('tickwork.vacuum'))

-- name: table_churn
-- tickwork's tables in this schema (attempts' partitions each on its own: the partitioned
-- parent holds no rows), with what autovacuum would weigh: dead rows and rows changed since
-- the last ANALYZE. Other tables of the schema are not tickwork's to vacuum.
SELECT s.relname AS name, s.n_live_tup AS live, s.n_dead_tup AS dead,
       s.n_mod_since_analyze AS changed
FROM pg_stat_user_tables s
LEFT JOIN pg_inherits i ON i.inhrelid = s.relid
LEFT JOIN pg_class parent ON parent.oid = i.inhparent
WHERE s.schemaname = current_schema()
  AND COALESCE(parent.relname, s.relname) = ANY(%(tables)s::text[])
ORDER BY s.relname

-- name: migrations_table
CREATE TABLE IF NOT EXISTS tickwork_migrations (
    version integer PRIMARY KEY,
    name    text NOT NULL
)

-- name: migrations_lock
-- Concurrent migrators wait for each other; the key is tickwork's own (ASCII "tick", "migr").
SELECT pg_advisory_xact_lock(1953063787, 1835624306)

-- name: migrations_table_exists
SELECT to_regclass('tickwork_migrations') IS NOT NULL AS present

-- name: migrations_done
SELECT version FROM tickwork_migrations

-- name: migration_record
INSERT INTO tickwork_migrations (version, name) VALUES (%s, %s)

-- name: meta_init
INSERT INTO tickwork_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING

-- name: meta_get
SELECT value FROM tickwork_meta WHERE key = %s

-- name: shard_leases_init
INSERT INTO shard_leases (shard) SELECT generate_series(0, %s - 1) ON CONFLICT (shard) DO NOTHING

-- name: notify_queues
-- Wakes the workers that LISTEN (drivers/postgres/notify.py); delivered at commit.
SELECT pg_notify('tickwork_wake', q) FROM unnest(%b::text[]) AS q

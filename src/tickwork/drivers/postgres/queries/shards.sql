-- name: shard_lock
-- One rebalancing scheduler at a time: counting the live ones and taking a share must not
-- interleave (a try would make a newcomer wait a tick; the lock is held for milliseconds).
SELECT pg_advisory_xact_lock(1953063787, 1936224868)

-- name: scheduler_node_beat
INSERT INTO scheduler_nodes (id, expires_at) VALUES (%(owner)s, %(until)s)
ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at

-- name: scheduler_nodes_live
SELECT count(*) AS live FROM scheduler_nodes WHERE expires_at > %(now)s

-- name: scheduler_nodes_forget
DELETE FROM scheduler_nodes WHERE expires_at < %(now)s - interval '1 day'

-- name: shard_leases_renew
UPDATE shard_leases SET expires_at = %(until)s
WHERE owner = %(owner)s AND shard < %(count)s
RETURNING shard

-- name: shard_leases_give_back
UPDATE shard_leases SET owner = NULL, expires_at = '-infinity'
WHERE owner = %(owner)s AND shard = ANY(%(shards)b::integer[])

-- name: shard_leases_take
UPDATE shard_leases SET owner = %(owner)s, expires_at = %(until)s
WHERE shard IN (
    SELECT shard FROM shard_leases
    WHERE (owner IS NULL OR expires_at <= %(now)s) AND shard < %(count)s
    ORDER BY shard
    LIMIT %(want)s
    FOR UPDATE SKIP LOCKED)
RETURNING shard

-- name: shard_leases_release
UPDATE shard_leases SET owner = NULL, expires_at = '-infinity' WHERE owner = %s

-- name: scheduler_node_leave
DELETE FROM scheduler_nodes WHERE id = %s

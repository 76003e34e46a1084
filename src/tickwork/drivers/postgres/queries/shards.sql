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

-- name: shard_leases_take
UPDATE shard_leases SET owner = %(owner)s, expires_at = %(until)s
WHERE shard IN (
    SELECT shard FROM shard_leases
    WHERE (owner IS NULL OR expires_at <= %(now)s) AND shard < %(count)s
    ORDER BY shard
    LIMIT %(want)s
    FOR UPDATE SKIP LOCKED)
RETURNING shard

-- name: shard_leases_steal
-- Take up to "want" shards from owners holding more than the fair share, one shard at a time
-- from whichever of them holds the most then (their highest-numbered shards first), never
-- leaving one below the fair share. The owner renews only what it still owns, so it simply
-- finds it holds fewer at its next pass (planning them until then is a harmless overlap).
WITH held AS (
    SELECT shard, owner,
           count(*) OVER (PARTITION BY owner) AS n,
           row_number() OVER (PARTITION BY owner ORDER BY shard DESC) AS k
    FROM shard_leases
    WHERE owner <> %(owner)s AND expires_at > %(now)s AND shard < %(count)s
)
UPDATE shard_leases SET owner = %(owner)s, expires_at = %(until)s
WHERE shard IN (
    SELECT shard FROM held
    WHERE k <= n - %(fair)s
    ORDER BY n - k DESC, owner, k
    LIMIT %(want)s)
RETURNING shard

-- name: shard_leases_release
UPDATE shard_leases SET owner = NULL, expires_at = '-infinity' WHERE owner = %s

-- name: scheduler_node_leave
DELETE FROM scheduler_nodes WHERE id = %s

-- name: shard_leases_announce
-- Delivered at commit: the other schedulers take the shards given back without waiting for
-- their next lease pass. The payload: who gave them back.
SELECT pg_notify('tickwork_shards', %s)

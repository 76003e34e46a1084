-- retry.lua: ack an entry and re-arm its key in the due set, as one atomic move.
--
-- KEYS[1]  the entry's band stream
-- KEYS[2]  the queue's due set
-- ARGV[1]  consumer group
-- ARGV[2]  entry id
-- ARGV[3]  due-set member ("<band>|<key>")
-- ARGV[4]  the new due time, ms
--
-- The caller wrote the retry to the store first (DESIGN rule 3). The key is re-armed even when
-- the entry was no longer pending: the store has it waiting, so delivering it is right, and a
-- duplicate costs one claim the store rejects. Plain ZADD: the store's due time wins.
-- Returns 1 if the entry was pending, else 0.
local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
return acked

-- dead.lua: move a poison entry to the queue's dead stream and ack it, atomically.
--
-- KEYS[1]  the entry's band stream
-- KEYS[2]  the queue's dead stream
-- ARGV[1]  consumer group
-- ARGV[2]  entry id
-- ARGV[3]  occurrence key
-- ARGV[4]  reason
-- ARGV[5]  band
-- ARGV[6]  the dead stream's approximate cap (MAXLEN ~)
--
-- Only an entry still pending moves: one already acked, retried or dead-lettered by another
-- process is left alone. The delivery count comes from the PEL, not the caller.
-- Returns 1 if moved, else 0.
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'k', ARGV[3], 'reason', ARGV[4],
           'n', p[1][4], 'b', ARGV[5], 'e', ARGV[2])
return redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])

-- trim.lua: drop the delivered and acked head of a band stream; never a pending entry, never
-- one not delivered yet.
--
-- KEYS[1]  a band stream
-- ARGV[1]  consumer group
--
-- Entries below the smallest pending id are acked (pending ids only ever grow at the tail:
-- new deliveries come after the last delivered id, and XAUTOCLAIM keeps ids). With nothing
-- pending, everything up to and including the last delivered id is acked. So XTRIM MINID to
-- the smallest pending id (or the id just after the last delivered one) drops
-- only settled entries. MINID rather than acking with XDEL: one call per stream per trim
-- instead of one XDEL per ack on the hot path, and whole stream nodes are freed at once
-- (Redis 8.2's ACKED policy does the same in the server; tickwork supports Redis 7).
-- Exact (=) trimming, so the head goes now; the cost is the settled entries, which the
-- trimmer's period bounds. No group yet: nothing is trimmed (no entry is known delivered).
-- Returns the number of entries removed.
local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[1])
if not ok then return 0 end
local last = nil
for _, g in ipairs(groups) do
  local name, delivered = nil, nil
  for j = 1, #g, 2 do
    if g[j] == 'name' then name = g[j + 1] end
    if g[j] == 'last-delivered-id' then delivered = g[j + 1] end
  end
  if name == ARGV[1] then last = delivered end
end
if last == nil then return 0 end
local summary = redis.call('XPENDING', KEYS[1], ARGV[1])
local minid
if tonumber(summary[1]) > 0 then
  minid = summary[2]
else  -- the id just after the last delivered one, so that one goes too
  local ms, seq = string.match(last, '^(%d+)-(%d+)$')
  minid = ms .. '-' .. string.format('%d', tonumber(seq) + 1)
end
return redis.call('XTRIM', KEYS[1], 'MINID', '=', minid)

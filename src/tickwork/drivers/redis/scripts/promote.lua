-- promote.lua: move due keys from the due set to their band streams, atomically.
--
-- KEYS[1]      the queue's due set (zset: member "<band>|<key>", score = due ms)
-- KEYS[2..n+1] the queue's band streams, band 0 (highest) first
-- ARGV[1]      limit: the most members one call moves (a bounded batch)
--
-- Returns {moved, next_due_ms or "", now_ms}. "Now" is Redis TIME, the one clock that decides
-- due-ness. Members are read, XADDed and ZREMed inside one script, so any number of promoters
-- can run without a lock: none moves a member twice, none is lost between the two structures.
-- A member whose band is missing or out of range goes to the lowest band: never dropped.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local lowest = #KEYS - 2  -- the last band index (KEYS[1] is the due set)
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES',
                           'LIMIT', 0, limit)
local moved = 0
for i = 1, #members, 2 do
  local m = members[i]
  local sep = string.find(m, '|', 1, true)
  local band, key = nil, m
  if sep then
    band = tonumber(string.sub(m, 1, sep - 1))
    key = string.sub(m, sep + 1)
  end
  if band == nil or band < 0 or band > lowest or band ~= math.floor(band) then
    band = lowest
  end
  redis.call('XADD', KEYS[band + 2], '*', 'k', key, 'd', members[i + 1])
  redis.call('ZREM', KEYS[1], m)
  moved = moved + 1
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local next_due = ''
if #nxt > 0 then next_due = nxt[2] end
return {moved, next_due, now}

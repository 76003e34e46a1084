-- promote.lua: move due keys from the due set to their band streams, atomically.
--
-- KEYS[1]      the queue's due set (zset: member "<band>|<key>", score = due ms)
-- KEYS[2..n+1] the queue's band streams, band 0 (highest) first
-- ARGV[1]      limit: the most members one call moves (a bounded batch)
-- ARGV[2]      backlog: the most entries the band streams may hold that no consumer of the
--              group got yet (0: no bound)
-- ARGV[3]      consumer group
--
-- Returns {moved, next_due_ms or "", now_ms, held}. "Now" is Redis TIME, the one clock that
-- decides due-ness. Members are read, XADDed and removed inside one script, so any number of
-- promoters can run without a lock: none moves a member twice, none is lost between the two
-- structures. A member whose band is missing or out of range goes to the lowest band: never
-- dropped.
--
-- With a backlog bound, a burst waits in the due set rather than in the streams, which are
-- read in order: only as many keys move as the streams have room for (held = 1 when none
-- could), and when more are due than move, half of the move is the newest due, newest
-- first, the rest the oldest. So what comes due while a burst drains is delivered behind a
-- backlog's worth of entries, not behind the whole burst.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local backlog = tonumber(ARGV[2] or '0')
local group = ARGV[3]
local lowest = #KEYS - 2  -- the last band index (KEYS[1] is the due set)

-- Entries of a stream the group has not been given yet, up to `most`: the group's lag, or,
-- when Redis cannot tell it (entries deleted inside the range, a promoted replica), the
-- entries after its last delivered id, counted.
local function undelivered(stream, most)
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', stream)
  if ok then
    for _, g in ipairs(groups) do
      local fields = {}
      for j = 1, #g, 2 do fields[g[j]] = g[j + 1] end
      if fields['name'] == group then
        if fields['lag'] then return math.min(tonumber(fields['lag']), most) end
        return #redis.call('XRANGE', stream, '(' .. fields['last-delivered-id'], '+',
                           'COUNT', most)
      end
    end
  end
  return math.min(redis.call('XLEN', stream), most)  -- no group yet: nothing delivered
end

local room, held = limit, 0
if backlog > 0 then
  local waiting = 0
  for i = 2, #KEYS do
    if waiting >= backlog then break end
    waiting = waiting + undelivered(KEYS[i], backlog - waiting)
  end
  room = math.min(limit, backlog - waiting)
  if room <= 0 then
    room, held = 0, 1
  end
end

-- The due members are ranks 0..due-1 of the set (ordered by score, then member), so both
-- parts of a move are runs of ranks: read with ZRANGE by rank, removed with ZREMRANGEBYRANK
-- (the newest run first, so the oldest keep their ranks), not one ZREM per member.
local due = 0
if room > 0 then due = redis.call('ZCOUNT', KEYS[1], '-inf', now) end
local parts = {}  -- {members with scores, newest first?}
local runs = {}   -- {first rank, last rank}, highest first
if due > 0 then
  local take = math.min(room, due)
  if backlog > 0 and due >= room and room > 1 then  -- more may be due than move
    local newest = math.floor(room / 2)
    parts[1] = {redis.call('ZRANGE', KEYS[1], due - newest, due - 1, 'WITHSCORES'), true}
    runs[1] = {due - newest, due - 1}
    take = room - newest
  end
  parts[#parts + 1] = {redis.call('ZRANGE', KEYS[1], 0, take - 1, 'WITHSCORES'), false}
  runs[#runs + 1] = {0, take - 1}
end

local function add(m, score)
  local sep = string.find(m, '|', 1, true)
  local band, key = nil, m
  if sep then
    band = tonumber(string.sub(m, 1, sep - 1))
    key = string.sub(m, sep + 1)
  end
  if band == nil or band < 0 or band > lowest or band ~= math.floor(band) then
    band = lowest
  end
  redis.call('XADD', KEYS[band + 2], '*', 'k', key, 'd', score)
end

local moved = 0
for _, part in ipairs(parts) do
  local members, newest_first = part[1], part[2]
  local n = #members / 2
  for j = 1, n do
    local i = newest_first and (n - j) * 2 + 1 or j * 2 - 1
    add(members[i], members[i + 1])
  end
  moved = moved + n
end
for _, run in ipairs(runs) do
  redis.call('ZREMRANGEBYRANK', KEYS[1], run[1], run[2])
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local next_due = ''
if #nxt > 0 then next_due = nxt[2] end
return {moved, next_due, now, held}

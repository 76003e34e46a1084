-- read.lua: new entries for one consumer, highest band first, without blocking.
--
-- KEYS[1..n]  the band streams in the order to read them (highest first, unless rotated)
-- ARGV[1]     consumer group
-- ARGV[2]     consumer
-- ARGV[3]     count: the most entries to return in total
--
-- Returns {groups_created, {key_index, id, field, value, ...}, ...}. When a band stream has no
-- group (first start, or Redis lost its data), every band stream without one gets one, made at
-- id 0 with MKSTREAM so nothing already in a stream is skipped; groups_created says how many.
local group, consumer = ARGV[1], ARGV[2]
local remaining = tonumber(ARGV[3])
local created = 0
local out = {created}

local function ensure_groups()
  for j = 1, #KEYS do
    local made = redis.pcall('XGROUP', 'CREATE', KEYS[j], group, '0', 'MKSTREAM')
    if type(made) == 'table' and made.err then
      if not string.find(made.err, 'BUSYGROUP', 1, true) then
        return redis.error_reply(made.err)
      end
    else
      created = created + 1
    end
  end
end

for i = 1, #KEYS do
  if remaining <= 0 then break end
  local reply = redis.pcall('XREADGROUP', 'GROUP', group, consumer, 'COUNT', remaining,
                            'STREAMS', KEYS[i], '>')
  if type(reply) == 'table' and reply.err then
    if not string.find(reply.err, 'NOGROUP', 1, true) then
      return redis.error_reply(reply.err)
    end
    ensure_groups()
    reply = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', remaining,
                       'STREAMS', KEYS[i], '>')
  end
  if reply then
    for _, e in ipairs(reply[1][2]) do
      local row = {i, e[1]}
      for _, v in ipairs(e[2]) do row[#row + 1] = v end
      out[#out + 1] = row
      remaining = remaining - 1
    end
  end
end
out[1] = created
return out

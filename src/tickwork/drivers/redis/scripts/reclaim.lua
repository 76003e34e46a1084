-- reclaim.lua: take over entries idle too long (their consumer died or hung), highest band first.
--
-- KEYS[1..n]  the band streams, highest first
-- ARGV[1]     consumer group
-- ARGV[2]     consumer taking them over
-- ARGV[3]     min idle, ms
-- ARGV[4]     count: the most entries to take in total
-- ARGV[4+i]   the XAUTOCLAIM cursor for KEYS[i] ("0-0" to start from the beginning)
--
-- Returns {{cursor_1, ..., cursor_n}, {key_index, id, delivery_count, field, value, ...}, ...}.
-- The cursors let the next call go on where this one stopped, so idle entries behind many busy
-- ones are reached too (XAUTOCLAIM scans at most 10 x COUNT PEL entries per call). The delivery
-- count is the one after this claim. A stream without the group is skipped.
local group, consumer = ARGV[1], ARGV[2]
local min_idle = ARGV[3]
local remaining = tonumber(ARGV[4])
local cursors = {}
local out = {cursors}
for i = 1, #KEYS do
  local cursor = ARGV[4 + i]
  if remaining > 0 then
    local reply = redis.pcall('XAUTOCLAIM', KEYS[i], group, consumer, min_idle, cursor,
                              'COUNT', remaining)
    if type(reply) == 'table' and reply.err then
      if not string.find(reply.err, 'NOGROUP', 1, true) then
        return redis.error_reply(reply.err)
      end
      cursor = '0-0'
    else
      cursor = reply[1]
      for _, e in ipairs(reply[2]) do
        if e[2] then  -- Redis 6.2 lists an entry deleted from the stream with nil fields
          local p = redis.call('XPENDING', KEYS[i], group, e[1], e[1], 1)
          local count = 1
          if #p > 0 then count = p[1][4] end
          local row = {i, e[1], count}
          for _, v in ipairs(e[2]) do row[#row + 1] = v end
          out[#out + 1] = row
          remaining = remaining - 1
        end
      end
    end
  end
  cursors[i] = cursor
end
return out

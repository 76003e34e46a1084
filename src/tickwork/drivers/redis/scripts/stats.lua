-- stats.lua: how much of one queue waits where.
--
-- KEYS[1]      the queue's due set
-- KEYS[2..n+1] the queue's band streams
-- ARGV[1]      consumer group
--
-- Returns {due, ready, pending}: keys waiting for their time, entries no consumer got yet (the
-- group's lag; the stream's length when the group is missing or its lag is unknown), and
-- entries delivered but not acked.
local due = redis.call('ZCARD', KEYS[1])
local ready, pending = 0, 0
for i = 2, #KEYS do
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[i])
  local found = false
  if ok then
    for _, g in ipairs(groups) do
      local fields = {}
      for j = 1, #g, 2 do fields[g[j]] = g[j + 1] end
      if fields['name'] == ARGV[1] then
        found = true
        pending = pending + fields['pending']
        if fields['lag'] then
          ready = ready + fields['lag']
        else
          ready = ready + redis.call('XLEN', KEYS[i])
        end
      end
    end
  end
  if not found then ready = ready + redis.call('XLEN', KEYS[i]) end
end
return {due, ready, pending}

-- The drain's summary reaches every shard's slot: the units each shard held when the drain
-- read them. A shard seen empty is believed so for EMPTY_BELIEF_MS (the drain renews it every
-- run while true); a shard seen with stock is no longer believed empty, so the tail's
-- candidates (maybe_stocked) are the shards that hold stock; and the units are kept (`seen`),
-- so the tail asks the fuller shards first, which are likelier still to hold a unit.
--- keys(shard): empty seen
--- args: units...
--- ok:
-- units: per shard, in order.
local until_ms = now_ms() + EMPTY_BELIEF_MS
local empty, stocked, seen = {}, {}, {}
for i, units in ipairs(A_UNITS) do
  local s = i - 1
  seen[#seen + 1] = s
  seen[#seen + 1] = units
  if tonumber(units) == 0 then
    empty[#empty + 1] = s
    empty[#empty + 1] = until_ms
  else
    stocked[#stocked + 1] = s
  end
end
if #empty > 0 then redis.call('HSET', K_EMPTY, unpack(empty)) end
if #stocked > 0 then redis.call('HDEL', K_EMPTY, unpack(stocked)) end
if #seen > 0 then redis.call('HSET', K_SEEN, unpack(seen)) end
return {OK}

-- The drain's summary reaches every shard's slot: which shards held stock when the drain read
-- them. A shard seen empty is believed so for EMPTY_BELIEF_MS (the drain renews it every run
-- while true); a shard seen with stock is no longer believed empty, so the tail's candidates
-- (maybe_stocked) are the shards that hold stock, and its first probe finds a unit.
--- keys: empty
--- args: picture
--- ok:
-- picture: one character per shard, in order: '1' held stock, '0' was empty.
local until_ms = now_ms() + EMPTY_BELIEF_MS
local empty, stocked = {}, {}
for s = 1, #A_PICTURE do
  if string.sub(A_PICTURE, s, s) == '0' then
    empty[#empty + 1] = s - 1
    empty[#empty + 1] = until_ms
  else
    stocked[#stocked + 1] = s - 1
  end
end
if #empty > 0 then redis.call('HSET', K_EMPTY, unpack(empty)) end
if #stocked > 0 then redis.call('HDEL', K_EMPTY, unpack(stocked)) end
return {OK}

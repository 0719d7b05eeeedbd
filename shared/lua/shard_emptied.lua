-- A buy took shard `shard`'s last unit: this slot believes it empty for EMPTY_BELIEF_MS, as a
-- tail that found it so would teach it, so that its own tails stop picking it from a picture
-- (the drain's summary) a second old. A refill clears the belief (shard_refilled.lua).
--- keys(shard): cfg empty
--- args: shard
--- ok:
if redis.call('EXISTS', K_CFG) == 0 then return {NOT_FOUND} end
local until_ms = now_ms() + EMPTY_BELIEF_MS
if until_ms > (tonumber(redis.call('HGET', K_EMPTY, A_SHARD)) or 0) then
  redis.call('HSET', K_EMPTY, A_SHARD, until_ms)
end
return {OK}

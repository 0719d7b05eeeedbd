-- The drain saw every shard of the event empty: this slot believes so too, for
-- EMPTY_BELIEF_MS, so its buyers hear "sold out" at once instead of each probing the others.
-- A refill clears the belief (shard_refilled.lua); the drain renews it every run while true.
--- keys: empty
--- args: shards
--- ok:
local until_ms = now_ms() + EMPTY_BELIEF_MS
for s = 0, tonumber(A_SHARDS) - 1 do redis.call('HSET', K_EMPTY, s, until_ms) end
return {OK}

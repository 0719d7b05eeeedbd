-- The event's own slot keeps what the storefront shows of its shards: units left per shard as
-- the drain last read them, and sold out when every shard was empty. Written by the scheduled
-- drain (a second or so behind the shards); never read on the buy path.
--- keys(slot): cfg stock
--- args: units...
--- ok:
-- units: per shard, in order. Otherwise: {NOT_FOUND}.
if redis.call('EXISTS', K_CFG) == 0 then return {NOT_FOUND} end
local left = 0
for i, units in ipairs(A_UNITS) do
  redis.call('HSET', K_STOCK, i - 1, units)
  left = left + tonumber(units)
end
if redis.call('HGET', K_CFG, 'warmed') == '1' then
  redis.call('HSET', K_CFG, 'soldout', left == 0 and '1' or '0')
end
return {OK}

-- Admin: writes one shard's part of the stock into its slot before the sale, once. A warm-up
-- cut short is finished by calling it again: a warmed shard answers what it holds.
--- keys(slot): cfg stock
--- args: units
--- ok: units:u64 already:flag
-- Otherwise: {NOT_FOUND}.
local cfg = hmget(K_CFG, 'shard', 'warmed')
if not cfg.shard then return {NOT_FOUND} end
if cfg.warmed == '1' then
  return {OK, tonumber(redis.call('HGET', K_STOCK, cfg.shard) or '0'), 1}
end
redis.call('HSET', K_STOCK, cfg.shard, tonumber(A_UNITS))
redis.call('HSET', K_CFG, 'warmed', '1')
return {OK, tonumber(A_UNITS), 0}

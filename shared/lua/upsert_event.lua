-- Admin: create or update an event's configuration.
--- keys: cfg
--- args: fields...
--- ok: created:flag
-- fields: field/value pairs, always including stock and shards. Otherwise: {CONFLICT} (stock
-- or shards change after warm-up).
local warmed = redis.call('HGET', K_CFG, 'warmed') == '1'
local created = redis.call('EXISTS', K_CFG) == 0
if warmed then
  local new, cur = pairs_to_table(A_FIELDS), hmget(K_CFG, 'stock', 'shards')
  if new.stock ~= cur.stock or new.shards ~= cur.shards then return {CONFLICT} end
end
redis.call('HSET', K_CFG, unpack(A_FIELDS))
if created then redis.call('HSET', K_CFG, 'soldout', '0', 'warmed', '0', 'drawn', '0') end
return {OK, created and 1 or 0}

-- Admin: create or update an event's configuration.
--- keys(slot): cfg
--- args: fields...
--- ok: created:flag
-- fields: field/value pairs, always including stock, shards, admission_mode and version.
-- Otherwise: {CONFLICT} (stock or shards change after warm-up).
-- admission_version, which every admission token names, is the version that created the event
-- or changed its admission mode: a token outlives neither.
local warmed = redis.call('HGET', K_CFG, 'warmed') == '1'
local created = redis.call('EXISTS', K_CFG) == 0
local new = pairs_to_table(A_FIELDS)
local cur = hmget(K_CFG, 'stock', 'shards', 'admission_mode')
if warmed and (new.stock ~= cur.stock or new.shards ~= cur.shards) then return {CONFLICT} end
redis.call('HSET', K_CFG, unpack(A_FIELDS))
if created then redis.call('HSET', K_CFG, 'soldout', '0', 'warmed', '0', 'drawn', '0') end
if created or new.admission_mode ~= cur.admission_mode then
  redis.call('HSET', K_CFG, 'admission_version', new.version)
end
return {OK, created and 1 or 0}

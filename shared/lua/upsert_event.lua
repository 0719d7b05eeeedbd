-- Admin: create or update an event's configuration.
-- KEYS: 1 cfg
-- ARGV: field/value pairs (always including stock and shards)
-- Reply: {OK, created} | {CONFLICT} (stock or shards change after warm-up)
local warmed = redis.call('HGET', KEYS[1], 'warmed') == '1'
local created = redis.call('EXISTS', KEYS[1]) == 0
local fields = {}
for i = 1, #ARGV, 2 do fields[ARGV[i]] = ARGV[i + 1] end
if warmed then
  local cur = hmget(KEYS[1], 'stock', 'shards')
  if fields.stock ~= cur.stock or fields.shards ~= cur.shards then return {CONFLICT} end
end
redis.call('HSET', KEYS[1], unpack(ARGV))
if created then redis.call('HSET', KEYS[1], 'soldout', '0', 'warmed', '0', 'drawn', '0') end
return {OK, created and 1 or 0}

-- Admin: write the stock into its shards before the sale, once. Keys never expire.
-- KEYS: 1 cfg, 2 non-empty shards (set), 3 stock (hash shard→units)
-- ARGV: none
-- Reply: {OK, stock, shards} | {CONFLICT} (already warmed) | {NOT_FOUND}
local cfg = hmget(KEYS[1], 'stock', 'shards', 'warmed')
if not cfg.stock then return {NOT_FOUND} end
if cfg.warmed == '1' then return {CONFLICT} end
local stock, shards = tonumber(cfg.stock), tonumber(cfg.shards)
local base, extra = math.floor(stock / shards), stock % shards
redis.call('DEL', KEYS[2], KEYS[3])
for i = 0, shards - 1 do
  local n = base
  if i < extra then n = n + 1 end
  redis.call('HSET', KEYS[3], i, n)
  if n > 0 then redis.call('SADD', KEYS[2], i) end
end
redis.call('HSET', KEYS[1], 'warmed', '1', 'soldout', stock == 0 and '1' or '0')
return {OK, stock, shards}

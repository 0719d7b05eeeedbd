-- Admin: write the stock into its shards before the sale, once. Keys never expire.
--- keys: cfg nonempty stock
--- args:
--- ok: stock:u64 shards:u32
-- Otherwise: {CONFLICT} (already warmed) | {NOT_FOUND}.
local cfg = hmget(K_CFG, 'stock', 'shards', 'warmed')
if not cfg.stock then return {NOT_FOUND} end
if cfg.warmed == '1' then return {CONFLICT} end
local stock, shards = tonumber(cfg.stock), tonumber(cfg.shards)
local base, extra = math.floor(stock / shards), stock % shards
redis.call('DEL', K_NONEMPTY, K_STOCK)
for i = 0, shards - 1 do
  local n = base
  if i < extra then n = n + 1 end
  redis.call('HSET', K_STOCK, i, n)
  if n > 0 then redis.call('SADD', K_NONEMPTY, i) end
end
redis.call('HSET', K_CFG, 'warmed', '1', 'soldout', stock == 0 and '1' or '0')
return {OK, stock, shards}

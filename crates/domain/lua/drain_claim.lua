-- drain: take (or renew) this shard's drain lease, with a fencing token.
--- keys(shard): drain_lease drain_fence cfg stock
--- args: owner lease_ms
--- ok: fence:i64 sku:text stock:i64 payment_timeout_s:i64 unit_amount:i64 currency:text left:i64
-- Otherwise: {CONFLICT, ms_left} (someone else holds it) | {NOT_FOUND}.
-- A new holder gets a new, larger fence (lib/lease.lua); Postgres refuses a batch whose fence is
-- older than the newest it has seen, so a drainer whose lease expired while it was slow cannot
-- write.
local cfg = hmget(K_CFG, 'sku', 'stock', 'payment_timeout_s', 'unit_amount', 'currency')
if not cfg.sku then return {NOT_FOUND} end
local owner, fence = lease_get(K_DRAIN_LEASE)
if not owner then
  fence = redis.call('INCR', K_DRAIN_FENCE)
elseif owner ~= A_OWNER then
  return {CONFLICT, redis.call('PTTL', K_DRAIN_LEASE)}
end
redis.call('SET', K_DRAIN_LEASE, lease_value(A_OWNER, fence), 'PX', tonumber(A_LEASE_MS))
-- left: the units this shard holds, so the drain sums the shards for the storefront for free.
-- The price lands with each order: what its buyer pays.
return {OK, fence, cfg.sku, tonumber(cfg.stock), tonumber(cfg.payment_timeout_s),
  tonumber(cfg.unit_amount or '0'), cfg.currency or '', units_left(K_STOCK)}

-- drain: take (or renew) the event's drain lease, with a fencing token.
-- KEYS: 1 lease, 2 fence counter, 3 cfg
-- ARGV: 1 owner id, 2 lease ms
-- Reply: {OK, fence, sku, stock, payment_timeout_s} | {CONFLICT, ms_left} (someone else holds it)
--        | {NOT_FOUND}
-- The lease value is "owner|fence". A new holder gets a new, larger fence; Postgres refuses a
-- batch whose fence is older than the newest it has seen, so a drainer whose lease expired
-- while it was slow cannot write.
local cfg = hmget(KEYS[3], 'sku', 'stock', 'payment_timeout_s')
if not cfg.sku then return {NOT_FOUND} end
local cur = redis.call('GET', KEYS[1])
local fence
if cur then
  local owner, f = string.match(cur, '^(.*)|(%d+)$')
  if owner ~= ARGV[1] then return {CONFLICT, redis.call('PTTL', KEYS[1])} end
  fence = tonumber(f)
else
  fence = redis.call('INCR', KEYS[2])
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. fence, 'PX', tonumber(ARGV[2]))
return {OK, fence, cfg.sku, tonumber(cfg.stock), tonumber(cfg.payment_timeout_s)}

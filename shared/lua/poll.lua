-- poll: a user's result, from Redis only. Read-only.
-- KEYS: 1 cfg, 2 bought (hash user→order), 3 drained counter, 4 orders (hash)
-- ARGV: 1 user
-- Reply: {OK, order, status, seq, drained, drain_rate} | {NONE, soldout} | {NOT_FOUND}
local order = redis.call('HGET', KEYS[2], ARGV[1])
if not order then
  local cfg = hmget(KEYS[1], 'start_ms', 'soldout')
  if not cfg.start_ms then return {NOT_FOUND} end
  return {NONE, cfg.soldout == '1' and 1 or 0}
end
local o = order_get(KEYS[4], order) or {status = 'queued', seq = '0'}
local status, seq = o.status, tonumber(o.seq)
local drained = tonumber(redis.call('GET', KEYS[3]) or '0')
local rate = tonumber(redis.call('HGET', KEYS[1], 'drain_rate') or '0')
return {OK, order, status, seq, drained, rate}

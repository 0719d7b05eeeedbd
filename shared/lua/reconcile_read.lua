-- reconcile: the Redis side of an event's books. Read-only.
-- KEYS: 1 cfg, 2 order sequence, 3 drained counter, 4 queue, 5 dead letters, 6 stock (hash),
--       7 orders (hash)
-- ARGV: none
-- Reply: {OK, initial stock, remaining in shards, accepted, drained, stream length, dead letters,
--         dead orders} | {NOT_FOUND}
-- Dead orders: dead letters that are accepted orders (their order is still `queued`): units
-- sold that never reached Postgres. Entries that never were orders do not count.
local cfg = hmget(KEYS[1], 'stock', 'shards')
if not cfg.stock then return {NOT_FOUND} end
local left = 0
for _, n in ipairs(redis.call('HVALS', KEYS[6])) do left = left + tonumber(n) end
return {OK, tonumber(cfg.stock), left, tonumber(redis.call('GET', KEYS[2]) or '0'),
  tonumber(redis.call('GET', KEYS[3]) or '0'), redis.call('XLEN', KEYS[4]), redis.call('XLEN', KEYS[5]),
  dead_orders(KEYS[5], KEYS[7])}

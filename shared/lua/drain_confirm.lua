-- drain: after the Postgres commit, mark orders confirmed and acknowledge their entries.
-- KEYS: 1 queue, 2 drained counter, 3 last errors, 4 orders (hash)
-- ARGV: (stream id, order id) pairs
-- Reply: {OK, newly confirmed}
-- Idempotent: an order already past `queued` is not counted again, so a redelivered entry
-- never moves the drained counter twice.
local n = 0
for i = 1, #ARGV, 2 do
  local o = order_get(KEYS[4], ARGV[i + 1])
  if o and o.status == 'queued' then
    order_set_status(KEYS[4], ARGV[i + 1], o, 'confirmed')
    n = n + 1
  end
  redis.call('XACK', KEYS[1], 'drain', ARGV[i])
  redis.call('HDEL', KEYS[3], ARGV[i])
end
if n > 0 then redis.call('INCRBY', KEYS[2], n) end
trim_acknowledged(KEYS[1])
return {OK, n}

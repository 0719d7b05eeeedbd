-- pay / timeout-release: mirror an order's final state in Redis for poll. For `expired`, the
-- unit goes back to its shard exactly once: the status flip and the HINCRBY are one step.
-- Order states form a small machine: queued → confirmed → paid | expired, and queued → paid |
-- expired (drained but not yet confirmed). `paid` and `expired` are final: nothing replaces them,
-- so a late or replayed `expired` can never put a paid unit back on sale.
-- KEYS: 1 cfg, 2 non-empty shards, 3 drained counter, 4 stock (hash), 5 orders (hash),
--       6 counts (hash: `paid` and `expired` count each order once, as it reaches that state)
-- ARGV: 1 status (paid | expired), then order ids
-- Reply: {OK, units released}
local released = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local o = order_get(KEYS[5], id)
  local status = o and o.status
  if status == 'queued' or status == 'confirmed' then
    -- Still `queued` means the drain committed it to Postgres (pay and release only see rows
    -- there) but died before confirming: count it as drained now, exactly once.
    if status == 'queued' then redis.call('INCR', KEYS[3]) end
    order_set_status(KEYS[5], id, o, ARGV[1])
    redis.call('HINCRBY', KEYS[6], ARGV[1], 1)
    if ARGV[1] == 'expired' then
      redis.call('HINCRBY', KEYS[4], o.shard, 1)
      redis.call('SADD', KEYS[2], o.shard)
      redis.call('HSET', KEYS[1], 'soldout', '0')
      released = released + 1
    end
  end
end
return {OK, released}

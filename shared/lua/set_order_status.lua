-- pay / timeout-release: mirror an order's final state in Redis for poll. For `expired`, the
-- unit goes back to its shard exactly once: the status flip and the INCR are one step.
-- Order states form a small machine: queued → confirmed → paid | expired, and queued → paid |
-- expired (drained but not yet confirmed). `paid` and `expired` are final: nothing replaces them,
-- so a late or replayed `expired` can never put a paid unit back on sale.
-- KEYS: 1 cfg, 2 non-empty shards, 3 drained counter
-- ARGV: 1 tag prefix, 2 status (paid | expired), then order ids
-- Reply: {OK, units released}
local released = 0
for i = 3, #ARGV do
  local key = ARGV[1] .. 'order:' .. ARGV[i]
  local o = hmget(key, 'status', 'shard')
  if o.status == 'queued' or o.status == 'confirmed' then
    -- Still `queued` means the drain committed it to Postgres (pay and release only see rows
    -- there) but died before confirming: count it as drained now, exactly once.
    if o.status == 'queued' then redis.call('INCR', KEYS[3]) end
    redis.call('HSET', key, 'status', ARGV[2])
    if ARGV[2] == 'expired' then
      redis.call('INCR', ARGV[1] .. 'stock:' .. o.shard)
      redis.call('SADD', KEYS[2], o.shard)
      redis.call('HSET', KEYS[1], 'soldout', '0')
      released = released + 1
    end
  end
end
return {OK, released}

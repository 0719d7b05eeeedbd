-- pay / timeout-release: mirror an order's final state in Redis for poll. For `expired`, the
-- unit goes back to its shard exactly once: the status flip and the HINCRBY are one step.
-- Order states form a small machine: queued → confirmed → paid | expired, and queued → paid |
-- expired (drained but not yet confirmed). `paid` and `expired` are final: nothing replaces them,
-- so a late or replayed `expired` can never put a paid unit back on sale.
-- counts: `paid` and `expired` count each order once, as it reaches that state.
--- keys(shard): cfg drained stock orders counts
--- args: status order_ids...
--- ok: released:u64
local released = 0
for _, id in ipairs(A_ORDER_IDS) do
  local o = order_get(K_ORDERS, id)
  local status = o and o.status
  if status == 'queued' or status == 'confirmed' then
    -- Still `queued` means the drain committed it to Postgres (pay and release only see rows
    -- there) but died before confirming: count it as drained now, exactly once.
    if status == 'queued' then redis.call('INCR', K_DRAINED) end
    order_set_status(K_ORDERS, id, o, A_STATUS)
    redis.call('HINCRBY', K_COUNTS, A_STATUS, 1)
    if A_STATUS == 'expired' then
      redis.call('HINCRBY', K_STOCK, o.shard, 1)
      released = released + 1
    end
  end
end
return {OK, released}

-- drain: after the Postgres commit, mark orders confirmed and acknowledge their entries.
--- keys(shard): queue drained drain_errors orders
--- args: entries...
--- ok: confirmed:u64
-- entries: (stream id, order id) pairs.
-- Idempotent: an order already past `queued` is not counted again, so a redelivered entry
-- never moves the drained counter twice.
local n = 0
for i = 1, #A_ENTRIES, 2 do
  local entry, id = A_ENTRIES[i], A_ENTRIES[i + 1]
  local o = order_get(K_ORDERS, id)
  if o and o.status == 'queued' then
    order_set_status(K_ORDERS, id, o, 'confirmed')
    n = n + 1
  end
  redis.call('XACK', K_QUEUE, 'drain', entry)
  redis.call('HDEL', K_DRAIN_ERRORS, entry)
end
if n > 0 then redis.call('INCRBY', K_DRAINED, n) end
trim_acknowledged(K_QUEUE)
return {OK, n}

-- reconcile: the Redis side of an event's books at one shard. Read-only.
--- keys(shard): cfg seq drained queue dead stock orders credited
--- args: lent_here...
--- ok: initial_stock:i64 remaining:i64 accepted:i64 drained:i64 stream_length:i64 dead_letters:i64 dead_orders:i64 in_transit:i64
-- Otherwise: {NOT_FOUND}.
-- lent_here: (transfer id, units) pairs other shards lent this one and have not settled; those
-- this shard has not credited yet are units in transit, counted here.
-- Dead orders: dead letters that are accepted orders (their order is still `queued`): units
-- sold that never reached Postgres. Entries that never were orders do not count.
local cfg = hmget(K_CFG, 'stock')
if not cfg.stock then return {NOT_FOUND} end
local in_transit = 0
for i = 1, #A_LENT_HERE, 2 do
  if redis.call('SISMEMBER', K_CREDITED, A_LENT_HERE[i]) == 0 then
    in_transit = in_transit + tonumber(A_LENT_HERE[i + 1])
  end
end
return {OK, tonumber(cfg.stock), units_left(K_STOCK), get_number(K_SEQ), get_number(K_DRAINED),
  redis.call('XLEN', K_QUEUE), redis.call('XLEN', K_DEAD), dead_orders(K_DEAD, K_ORDERS),
  in_transit}

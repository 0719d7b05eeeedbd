-- reconcile: the Redis side of an event's books. Read-only.
--- keys: cfg seq drained queue dead stock orders
--- args:
--- ok: initial_stock:i64 remaining:i64 accepted:i64 drained:i64 stream_length:i64 dead_letters:i64 dead_orders:i64
-- Otherwise: {NOT_FOUND}.
-- Dead orders: dead letters that are accepted orders (their order is still `queued`): units
-- sold that never reached Postgres. Entries that never were orders do not count.
local cfg = hmget(K_CFG, 'stock')
if not cfg.stock then return {NOT_FOUND} end
return {OK, tonumber(cfg.stock), units_left(K_STOCK), get_number(K_SEQ), get_number(K_DRAINED),
  redis.call('XLEN', K_QUEUE), redis.call('XLEN', K_DEAD), dead_orders(K_DEAD, K_ORDERS)}

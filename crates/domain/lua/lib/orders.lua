-- An order's state is one field of the event's orders hash: "status|shard|seq".

local function order_put(orders, id, status, shard, seq)
  redis.call('HSET', orders, id, status .. '|' .. shard .. '|' .. seq)
end

local function order_get(orders, id)
  local v = redis.call('HGET', orders, id)
  if not v then return nil end
  local status, shard, seq = string.match(v, '^(%a+)|(%d+)|(%d+)$')
  return {status = status, shard = shard, seq = seq}
end

-- Moves an order (read with order_get) to `status`, keeping its shard and place.
local function order_set_status(orders, id, o, status)
  order_put(orders, id, status, o.shard, o.seq)
end

-- Dead letters that are accepted orders (still `queued`): units sold that will never reach
-- Postgres by themselves. Entries that never were orders do not count. Reads at most 10,000.
local function dead_orders(dead, orders)
  local n = 0
  for _, e in ipairs(redis.call('XRANGE', dead, '-', '+', 'COUNT', 10000)) do
    local id = pairs_to_table(e[2]).order
    local o = id and order_get(orders, id)
    if o and o.status == 'queued' then n = n + 1 end
  end
  return n
end

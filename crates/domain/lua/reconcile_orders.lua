-- reconcile: one page of the event's orders with their Redis status, to name the offenders
-- when the books do not balance. Read-only; paged with HSCAN so a large event never blocks
-- Redis (the caller repeats until the cursor is "0"; HSCAN may repeat an order, never skips one).
--- keys(shard): bought orders
--- args: cursor page
--- ok: cursor:text count:u64 ...
-- Then `count` × (order id, status).
local page = redis.call('HSCAN', K_BOUGHT, A_CURSOR, 'COUNT', tonumber(A_PAGE))
local fields = page[2]
local out = {OK, page[1], #fields / 2}
for i = 2, #fields, 2 do
  local id = fields[i]
  local o = order_get(K_ORDERS, id)
  out[#out + 1] = id
  out[#out + 1] = o and o.status or 'missing'
end
return out

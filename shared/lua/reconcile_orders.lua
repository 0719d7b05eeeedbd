-- reconcile: one page of the event's orders with their Redis status, to name the offenders
-- when the books do not balance. Read-only; paged with HSCAN so a large event never blocks
-- Redis (the caller repeats until the cursor is "0"; HSCAN may repeat an order, never skips one).
-- KEYS: 1 bought (hash user → order), 2 orders (hash order → status|shard|seq)
-- ARGV: 1 cursor ("0" to start), 2 orders per page
-- Reply: {OK, next cursor, n, (order id, status) × n}
local page = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', tonumber(ARGV[2]))
local fields = page[2]
local out = {OK, page[1], #fields / 2}
for i = 2, #fields, 2 do
  local id = fields[i]
  out[#out + 1] = id
  local o = order_get(KEYS[2], id)
  out[#out + 1] = o and o.status or 'missing'
end
return out

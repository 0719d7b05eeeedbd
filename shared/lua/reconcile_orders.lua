-- reconcile: one page of the event's orders with their Redis status, to name the offenders
-- when the books do not balance. Read-only; paged with HSCAN so a large event never blocks
-- Redis (the caller repeats until the cursor is "0"; HSCAN may repeat an order, never skips one).
-- KEYS: 1 bought (hash user → order)
-- ARGV: 1 tag prefix, 2 cursor ("0" to start), 3 orders per page
-- Reply: {OK, next cursor, n, (order id, status) × n}
local page = redis.call('HSCAN', KEYS[1], ARGV[2], 'COUNT', tonumber(ARGV[3]))
local fields = page[2]
local out = {OK, page[1], #fields / 2}
for i = 2, #fields, 2 do
  local id = fields[i]
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', ARGV[1] .. 'order:' .. id, 'status') or 'missing'
end
return out

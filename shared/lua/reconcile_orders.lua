-- reconcile: every order of the event with its Redis status, to name the offenders when the
-- books do not balance. Read-only; only run when they do not (it walks all the event's orders).
-- KEYS: 1 bought (hash user → order)
-- ARGV: 1 tag prefix
-- Reply: {OK, n, (order id, status) × n}
local orders = redis.call('HVALS', KEYS[1])
local out = {OK, #orders}
for _, id in ipairs(orders) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', ARGV[1] .. 'order:' .. id, 'status') or 'missing'
end
return out

-- Admin: an event's state. Read-only. Spin flattens nested replies, so this is one flat list:
-- {OK, nfields, field, value, ..., nshards, stock0, stock1, ..., sold, drained, dead letters,
--  dead orders, stream length, admitted, registrants, ncounts, field, count, ...}
-- KEYS: 1 cfg, 2 order sequence, 3 drained counter, 4 queue, 5 admitted, 6 registrants,
--       7 dead letters, 8 stock (hash), 9 orders (hash), 10 counts (hash)
-- ARGV: none
local cfg = redis.call('HGETALL', KEYS[1])
if #cfg == 0 then return {NOT_FOUND} end
local out = {OK, #cfg / 2}
for _, v in ipairs(cfg) do out[#out + 1] = v end
local shards = tonumber(redis.call('HGET', KEYS[1], 'shards'))
out[#out + 1] = shards
for i = 0, shards - 1 do out[#out + 1] = tonumber(redis.call('HGET', KEYS[8], i) or '0') end
out[#out + 1] = tonumber(redis.call('GET', KEYS[2]) or '0')
out[#out + 1] = tonumber(redis.call('GET', KEYS[3]) or '0')
out[#out + 1] = redis.call('XLEN', KEYS[7])
out[#out + 1] = dead_orders(KEYS[7], KEYS[9])
out[#out + 1] = redis.call('XLEN', KEYS[4])
local admitted = redis.call('SCARD', KEYS[5])
out[#out + 1] = admitted
-- A lottery draw pops its winners out of the registrants: they still registered.
local drawing = redis.call('HGET', KEYS[1], 'drawing') == '1'
out[#out + 1] = redis.call('SCARD', KEYS[6]) + (drawing and admitted or 0)
local counts = redis.call('HGETALL', KEYS[10])
out[#out + 1] = #counts / 2
for _, v in ipairs(counts) do out[#out + 1] = v end
return out

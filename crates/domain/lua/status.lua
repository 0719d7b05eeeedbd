-- Admin: one shard's state, read-only: its configuration copy, its own units left (its stock
-- hash holds one field, its index), its counters. Spin flattens nested replies, so this is one
-- flat list.
--- keys(shard): cfg seq drained queue admitted registrants dead stock orders counts
--- args:
--- ok: ...
-- {OK, nfields, field, value, ..., stock, sold, drained, dead letters, dead orders, stream
--  length, admitted, registrants, ncounts, field, count, ...} | {NOT_FOUND}
local cfg = redis.call('HGETALL', K_CFG)
if #cfg == 0 then return {NOT_FOUND} end
local out = {OK, #cfg / 2}
for _, v in ipairs(cfg) do out[#out + 1] = v end
local shard = pairs_to_table(cfg).shard
out[#out + 1] = tonumber(shard and redis.call('HGET', K_STOCK, shard) or '0') or 0
out[#out + 1] = get_number(K_SEQ)
out[#out + 1] = get_number(K_DRAINED)
out[#out + 1] = redis.call('XLEN', K_DEAD)
out[#out + 1] = dead_orders(K_DEAD, K_ORDERS)
out[#out + 1] = redis.call('XLEN', K_QUEUE)
local admitted = redis.call('SCARD', K_ADMITTED)
out[#out + 1] = admitted
-- A lottery draw pops its winners out of the registrants: they still registered.
local drawing = pairs_to_table(cfg).drawing == '1'
out[#out + 1] = redis.call('SCARD', K_REGISTRANTS) + (drawing and admitted or 0)
local counts = redis.call('HGETALL', K_COUNTS)
out[#out + 1] = #counts / 2
for _, v in ipairs(counts) do out[#out + 1] = v end
return out

-- A shard lends up to `units` of its stock to another shard (a buy's tail, a rebalance): the
-- units leave this shard and a record of the transfer stays here (`lent`, lib/lent.lua) until
-- the receiver's credit is confirmed (shard_settle.lua). Idempotent by transfer id: a replay
-- answers what the first call lent.
--- keys(shard): cfg stock lent empty
--- args: transfer_id to units
--- ok: lent:u64 left:i64 ...
-- When it lent nothing, then (shard, until ms) pairs: the other shards it believes empty, so
-- the borrower learns them too (the news that shards are empty spreads with every probe).
local shard = redis.call('HGET', K_CFG, 'shard')
if not shard then return {NOT_FOUND} end
local prior = redis.call('HGET', K_LENT, A_TRANSFER_ID)
if prior then
  return {OK, lent_parse(prior).units, tonumber(redis.call('HGET', K_STOCK, shard) or '0')}
end
local left = tonumber(redis.call('HGET', K_STOCK, shard) or '0')
local n = math.max(0, math.min(left, tonumber(A_UNITS)))
if n > 0 then
  redis.call('HINCRBY', K_STOCK, shard, -n)
  lent_put(K_LENT, A_TRANSFER_ID, A_TO, n, now_ms())
  return {OK, n, left - n}
end
local reply, now = {OK, 0, left}, now_ms()
local beliefs = redis.call('HGETALL', K_EMPTY)
for i = 1, #beliefs, 2 do
  if tonumber(beliefs[i + 1]) > now then
    reply[#reply + 1] = tonumber(beliefs[i])
    reply[#reply + 1] = tonumber(beliefs[i + 1])
  end
end
return reply

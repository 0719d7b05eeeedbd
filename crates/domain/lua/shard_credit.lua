-- A shard receives units another shard lent it (a rebalance, or the repair of a tail cut short):
-- credited once per transfer id, whoever asks and however often.
--- keys(shard): cfg stock credited
--- args: transfer_id units
--- ok: credited:flag
local shard = redis.call('HGET', K_CFG, 'shard')
if not shard then return {NOT_FOUND} end
if redis.call('SADD', K_CREDITED, A_TRANSFER_ID) == 0 then return {OK, 0} end
redis.call('HINCRBY', K_STOCK, shard, tonumber(A_UNITS))
return {OK, 1}

-- Shard `shard` has stock again (a release, a rebalance, a repaired tail): this slot stops
-- believing it empty, and is not sold out any more (sold out is only ever "every shard empty").
--- keys(shard): cfg empty
--- args: shard
--- ok:
if redis.call('EXISTS', K_CFG) == 0 then return {NOT_FOUND} end
redis.call('HDEL', K_EMPTY, A_SHARD)
return {OK}

-- An event's configuration, as one slot holds it: the master's (`{sk:E}`), or a shard's copy.
-- One HGETALL: what every walk over the shards reads first to learn their count.
--- keys(slot): cfg
--- args:
--- ok: ...
-- {OK, field, value, ...} | {NOT_FOUND}
local cfg = redis.call('HGETALL', K_CFG)
if #cfg == 0 then return {NOT_FOUND} end
local out = {OK}
for _, v in ipairs(cfg) do out[#out + 1] = v end
return out

-- The global bucket across events, as one node keeps it (every node holds a copy): sets it when
-- given, then reads it.
--- keys(registry): global_limit
--- args: fields...
--- ok: rate:text burst:u32
-- fields: `rate` and `burst` pairs to set, or none to read. An unset limit is off (rate 0).
if #A_FIELDS > 0 then redis.call('HSET', K_GLOBAL_LIMIT, unpack(A_FIELDS)) end
local limit = hmget(K_GLOBAL_LIMIT, 'rate', 'burst')
return {OK, limit.rate or '0', tonumber(limit.burst) or 0}

-- Admin: change fields of an existing event (switches and limits, live).
-- KEYS: 1 cfg
-- ARGV: 1 tag prefix, then field/value pairs
-- Reply: {OK} | {NOT_FOUND}
if redis.call('EXISTS', KEYS[1]) == 0 then return {NOT_FOUND} end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return {OK}

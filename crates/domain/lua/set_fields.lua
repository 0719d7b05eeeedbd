-- Admin: change fields of an existing event (switches and limits, live).
--- keys(slot): cfg
--- args: fields...
--- ok:
-- fields: field/value pairs. Otherwise: {NOT_FOUND} | {CONFLICT} (a new end_ms not after the
-- event's start).
if redis.call('EXISTS', K_CFG) == 0 then return {NOT_FOUND} end
local end_ms = tonumber(pairs_to_table(A_FIELDS).end_ms)
if end_ms then
  local start = tonumber(redis.call('HGET', K_CFG, 'start_ms'))
  if start and end_ms <= start then return {CONFLICT} end
end
redis.call('HSET', K_CFG, unpack(A_FIELDS))
return {OK}

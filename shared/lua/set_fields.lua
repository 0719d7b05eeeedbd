-- Admin: change fields of an existing event (switches and limits, live).
-- KEYS: 1 cfg
-- ARGV: field/value pairs
-- Reply: {OK} | {NOT_FOUND} | {CONFLICT} (a new end_ms not after the event's start)
if redis.call('EXISTS', KEYS[1]) == 0 then return {NOT_FOUND} end
for i = 1, #ARGV, 2 do
  if ARGV[i] == 'end_ms' then
    local start = tonumber(redis.call('HGET', KEYS[1], 'start_ms'))
    if start and tonumber(ARGV[i + 1]) <= start then return {CONFLICT} end
  end
end
redis.call('HSET', KEYS[1], unpack(ARGV))
return {OK}

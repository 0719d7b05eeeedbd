-- The registry of events, for the scheduled jobs and the operators' list. Read-only.
--- keys(registry): registry archived
--- args:
--- ok: ...
-- Then each event id and whether an operator archived it (1 or 0).
local out = {OK}
for _, e in ipairs(redis.call('SMEMBERS', K_REGISTRY)) do
  out[#out + 1] = e
  out[#out + 1] = redis.call('SISMEMBER', K_ARCHIVED, e)
end
return out

-- The registry of events, for the scheduled jobs. Read-only.
--- keys: registry
--- args:
--- ok: ...
-- Then the event ids.
local out = {OK}
for _, e in ipairs(redis.call('SMEMBERS', K_REGISTRY)) do out[#out + 1] = e end
return out

-- The registry of events, for the scheduled jobs. Read-only.
-- KEYS: 1 registry (set)
-- ARGV: 1 unused prefix
-- Reply: {OK, event ids...}
local out = {OK}
for _, e in ipairs(redis.call('SMEMBERS', KEYS[1])) do out[#out + 1] = e end
return out

-- The registry of events, for the scheduled jobs. Read-only.
-- KEYS: 1 registry (set)
-- ARGV: none
-- Reply: {OK, event ids...}
local out = {OK}
for _, e in ipairs(redis.call('SMEMBERS', KEYS[1])) do out[#out + 1] = e end
return out

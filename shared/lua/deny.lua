-- Admin: add users and client addresses to an event's deny lists.
-- KEYS: 1 cfg, 2 denied users, 3 denied addresses
-- ARGV: 1 number of users n, 2..1+n users, then addresses
-- Reply: {OK} | {NOT_FOUND}
if redis.call('EXISTS', KEYS[1]) == 0 then return {NOT_FOUND} end
local n = tonumber(ARGV[1])
for i = 2, 1 + n do redis.call('SADD', KEYS[2], ARGV[i]) end
for i = 2 + n, #ARGV do redis.call('SADD', KEYS[3], ARGV[i]) end
return {OK}

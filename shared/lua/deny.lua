-- Admin: add users and client addresses to an event's deny lists.
-- KEYS: 1 cfg, 2 denied users, 3 denied addresses
-- ARGV: 1 tag prefix, 2 number of users n, 3..3+n-1 users, then addresses
-- Reply: {OK} | {NOT_FOUND}
if redis.call('EXISTS', KEYS[1]) == 0 then return {NOT_FOUND} end
local n = tonumber(ARGV[2])
for i = 3, 2 + n do redis.call('SADD', KEYS[2], ARGV[i]) end
for i = 3 + n, #ARGV do redis.call('SADD', KEYS[3], ARGV[i]) end
return {OK}

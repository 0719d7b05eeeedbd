-- Admin: add users and client addresses to an event's deny lists.
--- keys: cfg denied_users denied_addrs
--- args: users_count entries...
--- ok:
-- Refusals: {NOT_FOUND}. entries: users_count users, then addresses.
if redis.call('EXISTS', K_CFG) == 0 then return {NOT_FOUND} end
local n = tonumber(A_USERS_COUNT)
for i, entry in ipairs(A_ENTRIES) do
  redis.call('SADD', i <= n and K_DENIED_USERS or K_DENIED_ADDRS, entry)
end
return {OK}

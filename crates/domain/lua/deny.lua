-- Admin: add users and client address ranges to an event's deny lists.
--- keys(shard): cfg denied_users denied_nets denied_net_lens
--- args: users_count entries...
--- ok:
-- Refusals: {NOT_FOUND}. entries: users_count users, then ranges as their bits (`4:` or `6:` and
-- the prefix's bits), whose lengths precheck looks up by family.
if redis.call('EXISTS', K_CFG) == 0 then return {NOT_FOUND} end
local n = tonumber(A_USERS_COUNT)
for i, entry in ipairs(A_ENTRIES) do
  if i <= n then
    redis.call('SADD', K_DENIED_USERS, entry)
  else
    redis.call('SADD', K_DENIED_NETS, entry)
    redis.call('SADD', K_DENIED_NET_LENS, string.sub(entry, 1, 2) .. (#entry - 2))
  end
end
return {OK}

-- Admin: archives a registered event, or brings it back. Only the operators' event list reads
-- the flag: the scheduled jobs walk an archived event as any other.
--- keys(registry): registry archived
--- args: event archived
--- ok: was:flag
-- Otherwise: {NOT_FOUND} (not in this node's registry).
if redis.call('SISMEMBER', K_REGISTRY, A_EVENT) == 0 then return {NOT_FOUND} end
local was = redis.call('SISMEMBER', K_ARCHIVED, A_EVENT)
if A_ARCHIVED == '1' then
  redis.call('SADD', K_ARCHIVED, A_EVENT)
else
  redis.call('SREM', K_ARCHIVED, A_EVENT)
end
return {OK, was}

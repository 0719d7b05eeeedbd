-- A shard's drain lease is one string, "owner|fence": who holds it and the fencing token its
-- writes to Postgres carry. Only these helpers know the format.

local function lease_value(owner, fence)
  return owner .. '|' .. fence
end

-- The holder and fence (a number) of the lease at `key`; nil when none is held.
local function lease_get(key)
  local v = redis.call('GET', key)
  if not v then return nil end
  local owner, fence = string.match(v, '^(.*)|(%d+)$')
  return owner, tonumber(fence)
end

-- Whether `owner` holds the lease at `key` with `fence` (as claimed: a number or its digits).
local function lease_held(key, owner, fence)
  return redis.call('GET', key) == lease_value(owner, fence)
end

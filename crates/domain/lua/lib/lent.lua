-- A transfer a shard lent and whose credit is not yet settled: one field of its `lent` hash,
-- transfer id → "to|units|ms" (the receiving shard, the units, when it was lent). Only these
-- helpers know the format.

local function lent_put(lent, id, to, units, at_ms)
  redis.call('HSET', lent, id, to .. '|' .. units .. '|' .. at_ms)
end

-- A `lent` value as {to, units, at_ms}, numbers.
local function lent_parse(v)
  local to, units, at = string.match(v, '^(%d+)|(%d+)|(%d+)$')
  return {to = tonumber(to), units = tonumber(units), at_ms = tonumber(at)}
end

-- Reading Redis values into Lua ones.

-- HMGET into a table keyed by field name (a missing field is nil).
local function hmget(key, ...)
  local names = {...}
  local values = redis.call('HMGET', key, unpack(names))
  local t = {}
  for i, name in ipairs(names) do t[name] = values[i] or nil end
  return t
end

-- A flat {field, value, field, value, ...} list (HGETALL, XINFO, stream entries) as a table.
local function pairs_to_table(list)
  local t = {}
  for i = 1, #list, 2 do t[list[i]] = list[i + 1] end
  return t
end

-- A counter's value; a key that does not exist yet counts 0.
local function get_number(key)
  return tonumber(redis.call('GET', key) or '0')
end

-- drain: read the next batch of order intents for the lease holder.
-- KEYS: 1 queue (stream), 2 lease, 3 dead letters (stream), 4 last errors (hash id → error)
-- ARGV: 1 lease value "owner|fence", 2 batch size, 3 idle ms before an unacked entry is taken
--       over, 4 max deliveries
-- Reply: {OK, n, (id, order, user, shard, seq, created_ms) × n} | {CONFLICT} (lease lost)
-- Entries delivered to a drainer that died are taken over first (XAUTOCLAIM), then new ones.
-- Only the lease holder reads, so every run reads as the one consumer `drainer`: consumers
-- never pile up in the group (the fence, not the consumer name, tells runs apart).
-- An entry delivered more than max times, or malformed, goes to the dead-letter stream with
-- its last error and is acknowledged: visible to the operator, never silently dropped.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {CONFLICT} end
local owner = 'drainer'
local count, max = tonumber(ARGV[2]), tonumber(ARGV[4])
local ok = pcall(redis.call, 'XGROUP', 'CREATE', KEYS[1], 'drain', '0', 'MKSTREAM')
local entries = redis.call('XAUTOCLAIM', KEYS[1], 'drain', owner, ARGV[3], '0-0', 'COUNT', count)[2]
if #entries < count then
  local fresh = redis.call('XREADGROUP', 'GROUP', 'drain', owner, 'COUNT', count - #entries,
    'STREAMS', KEYS[1], '>')
  if fresh then for _, e in ipairs(fresh[1][2]) do entries[#entries + 1] = e end end
end
local out, n = {OK, 0}, 0
for _, e in ipairs(entries) do
  local id, f = e[1], {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  local pending = redis.call('XPENDING', KEYS[1], 'drain', id, id, 1)[1]
  local deliveries = pending and tonumber(pending[4]) or 1
  local reason = nil
  if not (f.order and f.user and tonumber(f.shard) and tonumber(f.seq) and tonumber(f.created_ms)) then
    reason = 'malformed entry'
  elseif deliveries > max then
    reason = 'delivered ' .. deliveries .. ' times; last error: ' .. (redis.call('HGET', KEYS[4], id) or 'none')
  end
  if reason then
    local dead = {'XADD', KEYS[3], '*', 'entry', id, 'reason', reason}
    for k, v in pairs(f) do dead[#dead + 1] = k; dead[#dead + 1] = v end
    redis.call(unpack(dead))
    redis.call('XACK', KEYS[1], 'drain', id)
    redis.call('HDEL', KEYS[4], id)
  else
    n = n + 1
    for _, v in ipairs({id, f.order, f.user, f.shard, f.seq, f.created_ms}) do out[#out + 1] = v end
  end
end
out[2] = n
if n < #entries then trim_acknowledged(KEYS[1]) end
return out

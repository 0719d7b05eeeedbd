-- drain: read the next batch of order intents for the lease holder.
--- keys(shard): queue drain_lease dead drain_errors
--- args: owner fence reclaim_idle_ms batch max_deliveries
--- ok: count:u64 ...
-- Then `count` × (id, order, user, shard, seq, created_ms). Otherwise {CONFLICT} (lease lost).
-- Only the lease holder reads, so every run reads as the one consumer `drainer`: consumers
-- never pile up in the group (the fence, not the consumer name, tells runs apart).
if not lease_held(K_DRAIN_LEASE, A_OWNER, A_FENCE) then return {CONFLICT} end
local CONSUMER = 'drainer'
local batch, max_deliveries = tonumber(A_BATCH), tonumber(A_MAX_DELIVERIES)

-- Entries delivered to a drainer that died are taken over first (XAUTOCLAIM), then new ones.
local function next_entries()
  -- The group may not exist yet (first drain of the event); creating it twice is an error.
  pcall(redis.call, 'XGROUP', 'CREATE', K_QUEUE, 'drain', '0', 'MKSTREAM')
  local entries = redis.call('XAUTOCLAIM', K_QUEUE, 'drain', CONSUMER, A_RECLAIM_IDLE_MS, '0-0',
    'COUNT', batch)[2]
  if #entries < batch then
    local fresh = redis.call('XREADGROUP', 'GROUP', 'drain', CONSUMER, 'COUNT', batch - #entries,
      'STREAMS', K_QUEUE, '>')
    if fresh then for _, e in ipairs(fresh[1][2]) do entries[#entries + 1] = e end end
  end
  return entries
end

-- Why an entry cannot be drained (malformed, or delivered too often), or nil.
local function poison(id, f)
  if not (f.order and f.user and tonumber(f.shard) and tonumber(f.seq) and tonumber(f.created_ms)) then
    return 'malformed entry'
  end
  local pending = redis.call('XPENDING', K_QUEUE, 'drain', id, id, 1)[1]
  local deliveries = pending and tonumber(pending[4]) or 1
  if deliveries > max_deliveries then
    return 'delivered ' .. deliveries .. ' times; last error: ' .. (redis.call('HGET', K_DRAIN_ERRORS, id) or 'none')
  end
  return nil
end

-- Moves an entry to the dead letters with its reason, visible to the operator, never dropped.
local function dead_letter(id, f, reason)
  local dead = {'XADD', K_DEAD, '*', 'entry', id, 'reason', reason}
  for k, v in pairs(f) do dead[#dead + 1] = k; dead[#dead + 1] = v end
  redis.call(unpack(dead))
  redis.call('XACK', K_QUEUE, 'drain', id)
  redis.call('HDEL', K_DRAIN_ERRORS, id)
end

local entries = next_entries()
local out, n = {OK, 0}, 0
for _, e in ipairs(entries) do
  local id, f = e[1], pairs_to_table(e[2])
  local reason = poison(id, f)
  if reason then
    dead_letter(id, f, reason)
  else
    n = n + 1
    for _, v in ipairs({id, f.order, f.user, f.shard, f.seq, f.created_ms}) do out[#out + 1] = v end
  end
end
out[2] = n
if n < #entries then trim_acknowledged(K_QUEUE) end
return out

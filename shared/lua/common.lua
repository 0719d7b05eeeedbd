-- Prepended to every script, after the reply codes (see shared/build.rs): the helpers they
-- share. Every key a script touches arrives in KEYS (Redis's rule for scripts: a cluster,
-- Dragonfly and Upstash rely on it), and all keys of one event share the hash tag
-- `{sk:<event>}`, so they stay in the event's one slot.

-- Server time in ms: every script uses Redis's clock, never a client's.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Token bucket: `burst` is the capacity, `rate` the refill per second; a new
-- bucket starts full. rate <= 0 disables the limit. Returns true when a token was taken.
local function take_token(key, rate, burst, now)
  if rate <= 0 then return true end
  local b = redis.call('HMGET', key, 'tokens', 'ts')
  local tokens, ts = tonumber(b[1]), tonumber(b[2])
  if not tokens then tokens, ts = burst, now end
  tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
  local allowed = tokens >= 1
  if allowed then tokens = tokens - 1 end
  redis.call('HSET', key, 'tokens', tostring(tokens), 'ts', now)
  -- An idle bucket is full again after burst/rate seconds: it may then go.
  redis.call('PEXPIRE', key, math.ceil(burst / rate * 1000) + 1000)
  return allowed
end

-- The sale window and switches, common to precheck and buy. Returns nil when the sale is open.
local function closed(cfg, now)
  if not cfg.start_ms then return {NOT_FOUND} end
  if cfg.soldout == '1' then return {SOLD_OUT} end
  -- Not warmed up yet counts as paused: there is no stock to judge "sold out" by.
  if cfg.enabled ~= '1' or cfg.warmed ~= '1' then return {PAUSED} end
  if now < tonumber(cfg.start_ms) then return {TOO_EARLY, tonumber(cfg.start_ms) - now} end
  if now >= tonumber(cfg.end_ms) then return {ENDED} end
  return nil
end

-- Counts a refusal in the event's counts hash (field = its reply code) and returns the reply:
-- the console's "refusals by code" cost one HINCRBY inside the script that refuses, never a
-- round trip. An unknown event is not counted, so nobody can create keys by asking.
-- The count is telemetry, kept out of the AOF and the replicas (`redis.set_repl`, last thing
-- the script does): a refusal then costs no disk write, where a sold-out storm would otherwise
-- make every refused buy an fsync'd write (measured with appendfsync always: 129k/s read-only,
-- 49k/s replicated, 105k/s unreplicated). The counts restart from zero after a Redis restart
-- or failover. Servers without `set_repl` count with replication.
local function refused(counts, reply)
  if reply[1] ~= NOT_FOUND then
    if redis.set_repl and redis.REPL_NONE then pcall(redis.set_repl, redis.REPL_NONE) end
    redis.call('HINCRBY', counts, reply[1], 1)
  end
  return reply
end

-- HMGET into a table keyed by field name.
local function hmget(key, ...)
  local names = {...}
  local values = redis.call('HMGET', key, unpack(names))
  local t = {}
  for i, name in ipairs(names) do t[name] = values[i] or nil end
  return t
end

-- The order stream keeps only what the drain still needs: entries below the oldest pending one
-- (or, with none pending, below the last delivered one) were acknowledged, landed in Postgres
-- or the dead letters, and go. Entries not yet delivered are never touched.
local function trim_acknowledged(queue)
  local pending = redis.call('XPENDING', queue, 'drain')
  local keep_from = nil
  if tonumber(pending[1]) > 0 then
    keep_from = pending[2]
  else
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', queue)) do
      local info = {}
      for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
      if info.name == 'drain' then keep_from = info['last-delivered-id'] end
    end
  end
  if keep_from then redis.call('XTRIM', queue, 'MINID', keep_from) end
end

-- An order's state, one field of the event's orders hash: "status|shard|seq" (one HSET per buy).
local function order_get(orders, id)
  local v = redis.call('HGET', orders, id)
  if not v then return nil end
  local status, shard, seq = string.match(v, '^(%a+)|(%d+)|(%d+)$')
  return {status = status, shard = shard, seq = seq}
end

-- Moves an order (read with order_get) to `status`, keeping its shard and place.
local function order_set_status(orders, id, o, status)
  redis.call('HSET', orders, id, status .. '|' .. o.shard .. '|' .. o.seq)
end

-- Dead letters that are accepted orders (still `queued`): units sold that will never reach
-- Postgres by themselves. Entries that never were orders do not count. Reads at most 10,000.
local function dead_orders(dead, orders)
  local n = 0
  for _, e in ipairs(redis.call('XRANGE', dead, '-', '+', 'COUNT', 10000)) do
    local f = e[2]
    for i = 1, #f, 2 do
      local o = f[i] == 'order' and order_get(orders, f[i + 1])
      if o and o.status == 'queued' then
        n = n + 1
      end
    end
  end
  return n
end

-- The sale's window, switches, stock and refusals. Every key a script touches arrives in KEYS
-- (Redis's rule for scripts: a cluster, Dragonfly and Upstash rely on it), and all keys of one
-- event share the hash tag `{sk:<event>}`, so they stay in the event's one slot.

-- The sale window and switches, common to precheck and buy. Returns nil when the sale is open.
-- `sold_out` tells whether the event is sold out as this slot sees it (a function: it costs a
-- read or two, and is asked only when the event exists and is warmed up).
local function closed(cfg, now, sold_out)
  if not cfg.start_ms then return {NOT_FOUND} end
  if cfg.warmed == '1' and sold_out() then return {SOLD_OUT} end
  -- Not warmed up yet counts as paused: there is no stock to judge "sold out" by.
  if cfg.enabled ~= '1' or cfg.warmed ~= '1' then return {PAUSED} end
  if now < tonumber(cfg.start_ms) then return {TOO_EARLY, tonumber(cfg.start_ms) - now} end
  if now >= tonumber(cfg.end_ms) then return {ENDED} end
  return nil
end

-- Counts a refusal in the event's counts hash (field = its reply code) and returns the reply:
-- the console's "refusals by code" cost one HINCRBY inside the script that refuses, never a
-- round trip. An unknown event is not counted, so nobody can create keys by asking.
-- The count is telemetry, kept out of the AOF and the replicas (`redis.set_repl`, the last
-- thing the script does), so a sold-out storm of refusals causes no disk writes (README,
-- "The faces"). The counts restart from zero after a Redis restart or failover. Servers
-- without `set_repl` count with replication.
local function refused(counts, reply)
  if reply[1] ~= NOT_FOUND then
    if redis.set_repl and redis.REPL_NONE then pcall(redis.set_repl, redis.REPL_NONE) end
    redis.call('HINCRBY', counts, reply[1], 1)
  end
  return reply
end

-- Units left over all shards. A shard is never below 0 outside a script (buy puts back at
-- once a unit it took from an empty shard), so the sum is exact.
local function units_left(stock)
  local left = 0
  for _, units in ipairs(redis.call('HVALS', stock)) do left = left + tonumber(units) end
  return left
end

-- Every stock shard of an event is a slot of its own (`{sk:E/s}`), holding a copy of the
-- configuration with its index (`shard`). A user's requests must land on their home shard,
-- `home_hash % shards`, or one-per-user would not hold across shards: a request that reached
-- another slot is answered {WRONG_SHARD, shards} and changes nothing. (A slot without `shard` is
-- not a shard's: nothing of the sale runs there.)
local function not_home(cfg, home_hash)
  if not cfg.shard then return {NOT_FOUND} end
  if tonumber(home_hash) % tonumber(cfg.shards) == tonumber(cfg.shard) then return nil end
  return {WRONG_SHARD, tonumber(cfg.shards)}
end

-- How long a slot believes another shard is empty after a tail found it so, or the drain saw
-- every shard empty (ms). A refill (release, rebalance, repair) clears the belief at once
-- (shard_refilled.lua); the expiry bounds a belief whose clearing was lost in a crash or raced
-- by a slower writer, so no shard is ever stranded for longer.
local EMPTY_BELIEF_MS = 5000

-- The other shards this slot does not believe empty (fresh beliefs in `empty`: shard → until).
local function maybe_stocked(empty, shards, self, now)
  local until_ms = pairs_to_table(redis.call('HGETALL', empty))
  local out = {}
  for s = 0, shards - 1 do
    local u = tonumber(until_ms[tostring(s)])
    if s ~= self and not (u and u > now) then out[#out + 1] = s end
  end
  return out
end

-- How many users may hold admission here: multiplier × stock for an event in one slot; a
-- shard's slot admits its part of that (`admission_cap`, written with its configuration).
local function admission_cap(cfg)
  return tonumber(cfg.admission_cap) or tonumber(cfg.stock) * tonumber(cfg.admission_multiplier)
end

-- Sold out as shard slot `cfg` sees it: no unit here, and every other shard believed empty.
-- No flag is kept: the beliefs expire, so a stale "sold out" cannot outlive EMPTY_BELIEF_MS.
local function sold_out_here(cfg, stock, empty, now)
  if tonumber(redis.call('HGET', stock, cfg.shard) or '0') > 0 then return false end
  return #maybe_stocked(empty, tonumber(cfg.shards), tonumber(cfg.shard), now) == 0
end

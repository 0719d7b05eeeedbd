-- buy on a sharded event, at the buyer's home shard's slot: the whole purchase in one atomic
-- step while the home shard has stock. When it is empty, the reply names the other shards this
-- slot's picture says hold stock, fuller ones likelier first; the caller lends a unit from the
-- first that has one (shard_lend.lua, asking crate::sale::TAIL_CANDIDATES at most) and comes back
-- here with it (`credit_id`): the tail (ARCHITECTURE.md, "One hot item over many Redis nodes: shards").
--- keys(shard): cfg purchase_token(user) bought queue seq buy_bucket drained stock orders counts empty credited seen
--- args: user purchase_token home_hash order_id credit_id credit_units empties...
--- ok: seq:u64 shard:u32 drained:u64
-- Otherwise: {TAIL, candidate shard...} | {WRONG_SHARD, shards} | the refusals of buy.lua.
-- credit_id/credit_units: a unit lent to this shard for this buy ('' and 0 when none); empties:
-- what the tail learnt: `s` for a shard it found empty (believed so here for EMPTY_BELIEF_MS),
-- `s@until` for one a probed shard believed empty until then.
local cfg = hmget(K_CFG, 'start_ms', 'end_ms', 'enabled', 'warmed', 'buy_rate', 'buy_burst',
  'shards', 'shard')
local now = now_ms()
if not cfg.start_ms then return {NOT_FOUND} end
local moved = not_home(cfg, A_HOME_HASH)
if moved then return moved end
local home = cfg.shard
-- A lent unit is credited first, whatever this buy becomes: it left its shard, so it must land
-- somewhere, once (the credited set makes a replay, or the repair's credit, a no-op).
if A_CREDIT_ID ~= '' and redis.call('SADD', K_CREDITED, A_CREDIT_ID) == 1 then
  redis.call('HINCRBY', K_STOCK, home, tonumber(A_CREDIT_UNITS))
end
for _, e in ipairs(A_EMPTIES) do
  local s, until_ms = string.match(e, '^(%d+)@?(%d*)$')
  if s then
    local u = tonumber(until_ms) or now + EMPTY_BELIEF_MS
    if u > now and u > (tonumber(redis.call('HGET', K_EMPTY, s)) or 0) then
      redis.call('HSET', K_EMPTY, s, u)
    end
  end
end
local shut = closed(cfg, now, function() return sold_out_here(cfg, K_STOCK, K_EMPTY, now) end)
if shut then return refused(K_COUNTS, shut) end
local order = redis.call('HGET', K_BOUGHT, A_USER)
if order then return refused(K_COUNTS, {ALREADY, order}) end
if redis.call('GET', K_PURCHASE_TOKEN) ~= A_PURCHASE_TOKEN then return refused(K_COUNTS, {BAD_TOKEN}) end
-- The bucket is taken once per buy: on its first round trip, not again on its tail's last.
if A_CREDIT_ID == '' and #A_EMPTIES == 0
    and not take_token(K_BUY_BUCKET, tonumber(cfg.buy_rate), tonumber(cfg.buy_burst), now) then
  return refused(K_COUNTS, {LIMITED})
end
if redis.call('HINCRBY', K_STOCK, home, -1) < 0 then
  redis.call('HINCRBY', K_STOCK, home, 1)
  local candidates = maybe_stocked(K_EMPTY, tonumber(cfg.shards), tonumber(home), now)
  if #candidates == 0 then
    -- Empty here, and every other shard was found empty moments ago: sold out.
    return refused(K_COUNTS, {SOLD_OUT})
  end
  -- The fuller a shard was at the drain's last summary, the likelier it still holds a unit:
  -- candidates in a random order weighted by those units (Efraimidis-Spirakis: each draws
  -- u^(1/w) and the largest go first), from the order id's random tail, so that tails racing
  -- for the last units spread over the shards that hold them.
  local from = tonumber(string.sub(A_ORDER_ID, -6), 16) or 0
  local seen = pairs_to_table(redis.call('HGETALL', K_SEEN))
  local keyed = {}
  for _, s in ipairs(candidates) do
    local x = ((from % 1000003) * 69069 + s * 2654435761 + 12345) % 2147483648
    local w = math.max(tonumber(seen[tostring(s)]) or 1, 1)
    keyed[#keyed + 1] = {math.log((x + 1) / 2147483649) / w, s}
  end
  table.sort(keyed, function(a, b) return a[1] > b[1] end)
  local reply = {TAIL}
  for _, k in ipairs(keyed) do reply[#reply + 1] = k[2] end
  return reply
end
local seq = redis.call('INCR', K_SEQ)
redis.call('HSET', K_BOUGHT, A_USER, A_ORDER_ID)
order_put(K_ORDERS, A_ORDER_ID, 'queued', home, seq)
redis.call('XADD', K_QUEUE, '*', 'order', A_ORDER_ID, 'user', A_USER, 'shard', home, 'seq', seq,
  'created_ms', now)
redis.call('DEL', K_PURCHASE_TOKEN)
return {OK, seq, tonumber(home), get_number(K_DRAINED)}

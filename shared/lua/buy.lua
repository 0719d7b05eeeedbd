-- buy: the whole purchase as one atomic step, so "accepted" and "enqueued" can never disagree.
--- keys: cfg purchase_token bought nonempty queue seq buy_bucket drained stock orders counts
--- args: user purchase_token home_hash order_id
--- ok: seq:u64 shard:u32 drained:u64
-- Refusals: {BAD_TOKEN} | {ALREADY, order} | {LIMITED} | {SOLD_OUT} | the window's (closed()).
-- home_hash picks the home shard (home_hash % shards); order_id is the new order's id.
--
-- Invariant kept here and by warm-up/release: a shard is in the non-empty set iff its stock > 0.
-- So the first candidate always has stock, and the set is empty only when every shard is.
local cfg = hmget(K_CFG, 'start_ms', 'end_ms', 'enabled', 'warmed', 'soldout', 'buy_rate', 'buy_burst',
  'shards')
local now = now_ms()
local shut = closed(cfg, now)
if shut then return refused(K_COUNTS, shut) end
-- One per user, checked before stock is touched (repeat clicks must not burn units). First, so
-- a buyer who lost a 202 and retries hears which order is theirs.
local order = redis.call('HGET', K_BOUGHT, A_USER)
if order then return refused(K_COUNTS, {ALREADY, order}) end
-- Validate before changing anything: a bad token burns nothing.
if redis.call('GET', K_PURCHASE_TOKEN) ~= A_PURCHASE_TOKEN then return refused(K_COUNTS, {BAD_TOKEN}) end
if not take_token(K_BUY_BUCKET, tonumber(cfg.buy_rate), tonumber(cfg.buy_burst), now) then
  return refused(K_COUNTS, {LIMITED})
end

-- Takes a unit from `shard` in one command; a shard that goes below zero was empty and is put
-- back at once (inside this script: nobody sees it). Returns the units left, or nil.
local function take_from(shard)
  local left = redis.call('HINCRBY', K_STOCK, shard, -1)
  if left >= 0 then return left end
  redis.call('HINCRBY', K_STOCK, shard, 1)
  return nil
end

local shard = tostring(tonumber(A_HOME_HASH) % tonumber(cfg.shards))
local left = take_from(shard)
if not left then
  -- Home shard empty: take another that still has stock (at most 3 looks, never blind probing).
  shard = nil
  for _, s in ipairs(redis.call('SRANDMEMBER', K_NONEMPTY, 3)) do
    left = take_from(s)
    if left then shard = s; break end
  end
  if not shard then
    mark_sold_out_if_empty(K_NONEMPTY, K_CFG)
    return refused(K_COUNTS, {SOLD_OUT})
  end
end
if left == 0 then
  redis.call('SREM', K_NONEMPTY, shard)
  mark_sold_out_if_empty(K_NONEMPTY, K_CFG)
end
local seq = redis.call('INCR', K_SEQ)
redis.call('HSET', K_BOUGHT, A_USER, A_ORDER_ID)
order_put(K_ORDERS, A_ORDER_ID, 'queued', shard, seq)
redis.call('XADD', K_QUEUE, '*', 'order', A_ORDER_ID, 'user', A_USER, 'shard', shard, 'seq', seq,
  'created_ms', now)
redis.call('DEL', K_PURCHASE_TOKEN)
return {OK, seq, tonumber(shard), get_number(K_DRAINED)}

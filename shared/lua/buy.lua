-- buy: the whole purchase as one atomic step, so "accepted" and "enqueued" can never disagree.
-- KEYS: 1 cfg, 2 purchase token of this user, 3 bought (hash user→order), 4 non-empty shards (set),
--       5 order queue (stream), 6 order sequence (counter), 7 the event's buy bucket,
--       8 drained counter, 9 stock (hash shard→units), 10 orders (hash order→status|shard|seq),
--       11 counts (hash: refusals by code)
-- ARGV: 1 user, 2 purchase token, 3 hash of event+user (home shard = hash % shards),
--       4 new order id
-- Reply: {OK, seq, shard, drained} | {BAD_TOKEN} | {ALREADY, order} | {LIMITED} | {SOLD_OUT} | closed codes
--
-- Invariant kept here and by warm-up/release: a shard is in the non-empty set iff its stock > 0.
-- So the first candidate always has stock, and the set is empty only when every shard is.
local cfg = hmget(KEYS[1], 'start_ms', 'end_ms', 'enabled', 'warmed', 'soldout', 'buy_rate', 'buy_burst',
  'shards')
local now = now_ms()
local shut = closed(cfg, now)
if shut then return refused(KEYS[11], shut) end
-- One per user, checked before stock is touched (repeat clicks must not burn units). First, so
-- a buyer who lost a 202 and retries hears which order is theirs.
local order = redis.call('HGET', KEYS[3], ARGV[1])
if order then return refused(KEYS[11], {ALREADY, order}) end
-- Validate before changing anything: a bad token burns nothing.
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return refused(KEYS[11], {BAD_TOKEN}) end
if not take_token(KEYS[7], tonumber(cfg.buy_rate), tonumber(cfg.buy_burst), now) then
  return refused(KEYS[11], {LIMITED})
end

-- Take a unit from the home shard in one command; a shard that goes below zero was empty and is
-- put back at once (all inside this script: nobody sees it).
local stock = KEYS[9]
local shard = tostring(tonumber(ARGV[3]) % tonumber(cfg.shards))
local left = redis.call('HINCRBY', stock, shard, -1)
if left < 0 then
  redis.call('HINCRBY', stock, shard, 1)
  -- Home shard empty: take another that still has stock (at most 3 looks, never blind probing).
  shard = nil
  for _, s in ipairs(redis.call('SRANDMEMBER', KEYS[4], 3)) do
    left = redis.call('HINCRBY', stock, s, -1)
    if left >= 0 then shard = s; break end
    redis.call('HINCRBY', stock, s, 1)
  end
  if not shard then
    if redis.call('SCARD', KEYS[4]) == 0 then redis.call('HSET', KEYS[1], 'soldout', '1') end
    return refused(KEYS[11], {SOLD_OUT})
  end
end
if left == 0 then
  redis.call('SREM', KEYS[4], shard)
  if redis.call('SCARD', KEYS[4]) == 0 then redis.call('HSET', KEYS[1], 'soldout', '1') end
end
local seq = redis.call('INCR', KEYS[6])
local id = ARGV[4]
redis.call('HSET', KEYS[3], ARGV[1], id)
redis.call('HSET', KEYS[10], id, 'queued|' .. shard .. '|' .. seq)
redis.call('XADD', KEYS[5], '*', 'order', id, 'user', ARGV[1], 'shard', shard, 'seq', seq,
  'created_ms', now)
redis.call('DEL', KEYS[2])
return {OK, seq, tonumber(shard), tonumber(redis.call('GET', KEYS[8]) or '0')}

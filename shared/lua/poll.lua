-- poll: a user's result, from Redis only. Its one write elects, at most once per `nudge_ms`,
-- a poll whose order is still queued to drain the event after answering (the poll-carried
-- drain, for platforms whose scheduler is coarse; 0 turns it off).
-- KEYS: 1 cfg, 2 bought (hash user→order), 3 drained counter, 4 orders (hash), 5 drain nudge
-- ARGV: 1 user, 2 nudge_ms
-- Reply: {OK, order, status, seq, drained, drain_rate, drain_due} | {NONE, soldout} | {NOT_FOUND}
local order = redis.call('HGET', KEYS[2], ARGV[1])
if not order then
  local cfg = hmget(KEYS[1], 'start_ms', 'soldout')
  if not cfg.start_ms then return {NOT_FOUND} end
  return {NONE, cfg.soldout == '1' and 1 or 0}
end
local o = order_get(KEYS[4], order) or {status = 'queued', seq = '0'}
local status, seq = o.status, tonumber(o.seq)
local drained = tonumber(redis.call('GET', KEYS[3]) or '0')
local rate = tonumber(redis.call('HGET', KEYS[1], 'drain_rate') or '0')
local nudge_ms = tonumber(ARGV[2]) or 0
local due = 0
if status == 'queued' and nudge_ms > 0
    and redis.call('SET', KEYS[5], '1', 'NX', 'PX', nudge_ms) then
  due = 1
end
return {OK, order, status, seq, drained, rate, due}

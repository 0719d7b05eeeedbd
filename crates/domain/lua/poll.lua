-- poll: a user's result, from Redis only. Its one write elects, at most once per
-- `poll_drain_ms`, a poll whose order is still queued to drain this shard after answering
-- (the poll-carried drain, for platforms whose scheduler is coarse; 0 turns it off).
--- keys(shard): cfg bought drained orders drain_nudge stock empty refunds
--- args: user poll_drain_ms home_hash
--- ok: order_id:text status:order_status seq:u64 drained:u64 drain_rate:u64 drain_due:flag refund:text refund_payments:u64
-- Otherwise: {WRONG_SHARD, shards} | {NONE, sold_out (0/1)} (no order) | {NOT_FOUND}.
local cfg = hmget(K_CFG, 'start_ms', 'warmed', 'shard', 'shards')
if not cfg.start_ms then return {NOT_FOUND} end
local moved = not_home(cfg, A_HOME_HASH)
if moved then return moved end
local order = redis.call('HGET', K_BOUGHT, A_USER)
if not order then
  local sold_out = cfg.warmed == '1' and sold_out_here(cfg, K_STOCK, K_EMPTY, now_ms())
  return {NONE, sold_out and 1 or 0}
end
local o = order_get(K_ORDERS, order) or {status = 'queued', seq = '0'}
local rate = tonumber(redis.call('HGET', K_CFG, 'drain_rate') or '0')
local every_ms = tonumber(A_POLL_DRAIN_MS) or 0
local due = 0
if o.status == 'queued' and every_ms > 0
    and redis.call('SET', K_DRAIN_NUDGE, '1', 'NX', 'PX', every_ms) then
  due = 1
end
-- What is paid back to the buyer, if anything ('' and 0 when nothing).
local refund, payments = string.match(redis.call('HGET', K_REFUNDS, order) or '', '^(%a+)|(%d+)$')
return {OK, order, o.status, tonumber(o.seq), get_number(K_DRAINED), rate, due, refund or '',
  tonumber(payments or '0')}

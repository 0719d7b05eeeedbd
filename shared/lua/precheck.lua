-- precheck: the gate before buy. Hands out a one-time purchase token.
-- KEYS: 1 cfg, 2 denied users (set), 3 denied client addresses (set), 4 bought (hash user→order),
--       5 purchase token of this user, 6 this user's rate bucket, 7 counts (hash: refusals by code)
-- ARGV: 1 user, 2 client address, 3 new purchase token
-- Reply: {OK, ttl_ms} | {TOO_EARLY, ms_left} | {DENIED} | {ALREADY, order} | {LIMITED} | closed codes
local cfg = hmget(KEYS[1], 'start_ms', 'end_ms', 'enabled', 'warmed', 'soldout', 'user_rate', 'user_burst', 'purchase_token_ttl_ms')
local now = now_ms()
local shut = closed(cfg, now)
if shut then return refused(KEYS[7], shut) end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 or redis.call('SISMEMBER', KEYS[3], ARGV[2]) == 1 then
  return refused(KEYS[7], {DENIED})
end
local order = redis.call('HGET', KEYS[4], ARGV[1])
if order then return refused(KEYS[7], {ALREADY, order}) end
if not take_token(KEYS[6], tonumber(cfg.user_rate), tonumber(cfg.user_burst), now) then
  return refused(KEYS[7], {LIMITED})
end
-- SET replaces any earlier token: one valid purchase token per user.
local ttl = tonumber(cfg.purchase_token_ttl_ms)
redis.call('SET', KEYS[5], ARGV[3], 'PX', ttl)
return {OK, ttl}

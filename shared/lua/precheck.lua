-- precheck: the gate before buy. Hands out a one-time purchase token.
--- keys: cfg denied_users denied_addrs bought purchase_token user_bucket counts stock empty
--- args: user client_addr admission_version purchase_token home_hash
--- ok: ttl_ms:u64
-- Refusals: {WRONG_SHARD, shards} | {STALE_ADMISSION} | {DENIED} | {ALREADY, order} | {LIMITED} | the window's (closed()).
local cfg = hmget(K_CFG, 'start_ms', 'end_ms', 'enabled', 'warmed', 'user_rate', 'user_burst', 'purchase_token_ttl_ms', 'shard', 'shards', 'admission_version')
local now = now_ms()
if cfg.start_ms then
  local moved = not_home(cfg, A_HOME_HASH)
  if moved then return moved end
end
local shut = closed(cfg, now, function() return sold_out_here(cfg, K_STOCK, K_EMPTY, now) end)
if shut then return refused(K_COUNTS, shut) end
-- A token of an earlier admission (the event re-created, its admission mode switched) is void.
if A_ADMISSION_VERSION ~= (cfg.admission_version or '') then
  return refused(K_COUNTS, {STALE_ADMISSION})
end
if redis.call('SISMEMBER', K_DENIED_USERS, A_USER) == 1
    or redis.call('SISMEMBER', K_DENIED_ADDRS, A_CLIENT_ADDR) == 1 then
  return refused(K_COUNTS, {DENIED})
end
local order = redis.call('HGET', K_BOUGHT, A_USER)
if order then return refused(K_COUNTS, {ALREADY, order}) end
if not take_token(K_USER_BUCKET, tonumber(cfg.user_rate), tonumber(cfg.user_burst), now) then
  return refused(K_COUNTS, {LIMITED})
end
-- SET replaces any earlier token: one valid purchase token per user.
local ttl = tonumber(cfg.purchase_token_ttl_ms)
redis.call('SET', K_PURCHASE_TOKEN, A_PURCHASE_TOKEN, 'PX', ttl)
return {OK, ttl}

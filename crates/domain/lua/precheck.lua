-- precheck: the gate before buy. Hands out a one-time purchase token.
--- keys(shard): cfg denied_users denied_nets denied_net_lens bought purchase_token(user) user_bucket(user) global_bucket counts stock empty
--- args: user client_bits admission_version purchase_token home_hash gray_bucket
--- ok: ttl_ms:u64
-- Refusals: {WRONG_SHARD, shards} | {STALE_ADMISSION} | {DENIED} | {ALREADY, order} | {NOT_RELEASED} | {LIMITED} | the window's (closed()).
-- client_bits: the client's address as its bits (`4:` or `6:` and every bit), '' when unknown.
-- gray_bucket: the user's place in the gray release, 0-99 (ids::gray_bucket).
-- The limits (gray release, the user's bucket, the shard's part of the global bucket) each
-- refuse unless the event lists them in `shadow`: then the refusal is only counted
-- (`shadow_<limit>`) and the request goes on.

-- Whether a denied range holds the client: a range is denied as its prefix's bits, so one
-- SISMEMBER per prefix length in use for the client's family.
local function denied_addr()
  if A_CLIENT_BITS == '' then return false end
  local family = string.sub(A_CLIENT_BITS, 1, 2)
  for _, len in ipairs(redis.call('SMEMBERS', K_DENIED_NET_LENS)) do
    if string.sub(len, 1, 2) == family then
      local prefix = string.sub(A_CLIENT_BITS, 1, 2 + tonumber(string.sub(len, 3)))
      if redis.call('SISMEMBER', K_DENIED_NETS, prefix) == 1 then return true end
    end
  end
  return false
end

local cfg = hmget(K_CFG, 'start_ms', 'end_ms', 'enabled', 'warmed', 'user_rate', 'user_burst', 'purchase_token_ttl_ms', 'shard', 'shards', 'admission_version', 'gray_percent', 'global_rate', 'global_burst', 'shadow')

-- A limit's refusal, or nil when the limit is in shadow mode (counted, not enforced).
local function limit(name, reply)
  if string.find(',' .. (cfg.shadow or '') .. ',', ',' .. name .. ',', 1, true) then
    redis.call('HINCRBY', K_COUNTS, 'shadow_' .. name, 1)
    return nil
  end
  return refused(K_COUNTS, reply)
end

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
if redis.call('SISMEMBER', K_DENIED_USERS, A_USER) == 1 or denied_addr() then
  return refused(K_COUNTS, {DENIED})
end
local order = redis.call('HGET', K_BOUGHT, A_USER)
if order then return refused(K_COUNTS, {ALREADY, order}) end
local over
if tonumber(A_GRAY_BUCKET) >= (tonumber(cfg.gray_percent) or 100) then
  over = limit('gray', {NOT_RELEASED})
  if over then return over end
end
if not take_token(K_USER_BUCKET, tonumber(cfg.user_rate), tonumber(cfg.user_burst), now) then
  over = limit('user', {LIMITED})
  if over then return over end
end
if not take_token(K_GLOBAL_BUCKET, tonumber(cfg.global_rate) or 0, tonumber(cfg.global_burst) or 0, now) then
  over = limit('global', {LIMITED})
  if over then return over end
end
-- SET replaces any earlier token: one valid purchase token per user.
local ttl = tonumber(cfg.purchase_token_ttl_ms)
redis.call('SET', K_PURCHASE_TOKEN, A_PURCHASE_TOKEN, 'PX', ttl)
return {OK, ttl}

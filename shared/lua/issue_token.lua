-- issue-token: admit a user to an event, idempotently.
--- keys: cfg admitted registrants counts stock empty
--- args: user home_hash
--- ok:
-- Otherwise: {WRONG_SHARD, shards} | {REGISTERED} | {NOT_SELECTED} | {ADMISSION_CLOSED} | {SOLD_OUT} | {ENDED} | {NOT_FOUND}.
local cfg = hmget(K_CFG, 'start_ms', 'end_ms', 'warmed', 'stock', 'admission_multiplier', 'admission_mode', 'drawn', 'drawing', 'admission_cap', 'shard', 'shards')
local now = now_ms()
if not cfg.start_ms then return {NOT_FOUND} end
local moved = not_home(cfg, A_HOME_HASH)
if moved then return moved end
if redis.call('SISMEMBER', K_ADMITTED, A_USER) == 1 then return {OK} end
if cfg.warmed == '1' and sold_out_here(cfg, K_STOCK, K_EMPTY, now) then
  return refused(K_COUNTS, {SOLD_OUT})
end
if now >= tonumber(cfg.end_ms) then return refused(K_COUNTS, {ENDED}) end
if cfg.admission_mode == 'lottery' then
  if cfg.drawn == '1' then return refused(K_COUNTS, {NOT_SELECTED}) end
  -- While a paged draw runs, registration is closed; registrants wait for their page.
  if cfg.drawing == '1' then
    if redis.call('SISMEMBER', K_REGISTRANTS, A_USER) == 1 then return {REGISTERED} end
    return refused(K_COUNTS, {NOT_SELECTED})
  end
  redis.call('SADD', K_REGISTRANTS, A_USER)
  return {REGISTERED}
end
if redis.call('SCARD', K_ADMITTED) >= admission_cap(cfg) then
  return refused(K_COUNTS, {ADMISSION_CLOSED})
end
redis.call('SADD', K_ADMITTED, A_USER)
return {OK}

-- issue-token: admit a user to an event, idempotently.
-- KEYS: 1 cfg, 2 admitted (set), 3 registrants (set), 4 counts (hash: refusals by code)
-- ARGV: 1 user
-- Reply: {OK} | {REGISTERED} | {NOT_SELECTED} | {ADMISSION_CLOSED} | {SOLD_OUT} | {ENDED} | {NOT_FOUND}
local cfg = hmget(KEYS[1], 'start_ms', 'end_ms', 'soldout', 'stock', 'admission_multiplier', 'admission_mode', 'drawn', 'drawing')
local now = now_ms()
if not cfg.start_ms then return {NOT_FOUND} end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return {OK} end
if cfg.soldout == '1' then return refused(KEYS[4], {SOLD_OUT}) end
if now >= tonumber(cfg.end_ms) then return refused(KEYS[4], {ENDED}) end
if cfg.admission_mode == 'lottery' then
  if cfg.drawn == '1' then return refused(KEYS[4], {NOT_SELECTED}) end
  -- While a paged draw runs, registration is closed; registrants wait for their page.
  if cfg.drawing == '1' then
    if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return {REGISTERED} end
    return refused(KEYS[4], {NOT_SELECTED})
  end
  redis.call('SADD', KEYS[3], ARGV[1])
  return {REGISTERED}
end
if redis.call('SCARD', KEYS[2]) >= tonumber(cfg.stock) * tonumber(cfg.admission_multiplier) then
  return refused(KEYS[4], {ADMISSION_CLOSED})
end
redis.call('SADD', KEYS[2], ARGV[1])
return {OK}

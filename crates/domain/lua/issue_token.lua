-- issue-token: admit a user to an event, idempotently.
--- keys(shard): cfg admitted registrants counts stock empty addr_bucket(addr) used_challenge(challenge)
--- args: user home_hash pow_bits challenge_ttl_ms
--- ok: admission_version:text end_ms:u64
-- Otherwise: {WRONG_SHARD, shards} | {NOT_OPEN, wait_ms} | {CHALLENGE_REQUIRED, difficulty} |
-- {CHALLENGE_USED} | {LIMITED} | {REGISTERED} | {NOT_SELECTED} | {ADMISSION_CLOSED} |
-- {SOLD_OUT} | {ENDED} | {NOT_FOUND}.
-- pow_bits: the difficulty of the challenge the guest checked was solved (0: none); it must
-- reach the event's difficulty now. challenge_ttl_ms: how long that challenge lives, so its
-- "used" mark (`challenge`) outlives it; 0 when there is none. addr_bucket: the client
-- address's admission bucket in this shard.
local cfg = hmget(K_CFG, 'start_ms', 'end_ms', 'warmed', 'stock', 'admission_multiplier', 'admission_mode', 'drawn', 'drawing', 'admission_cap', 'shard', 'shards', 'admission_opens_ms', 'pow_difficulty', 'admission_addr_rate', 'admission_addr_burst', 'admission_version')
local now = now_ms()
if not cfg.start_ms then return {NOT_FOUND} end
local moved = not_home(cfg, A_HOME_HASH)
if moved then return moved end
local opens = tonumber(cfg.admission_opens_ms or '0')
if now < opens then return refused(K_COUNTS, {NOT_OPEN, opens - now}) end
local difficulty = tonumber(cfg.pow_difficulty or '0')
if tonumber(A_POW_BITS) < difficulty then
  return refused(K_COUNTS, {CHALLENGE_REQUIRED, difficulty})
end
-- A used challenge is refused before the address's bucket is touched (a replay spends none of
-- an honest address's tokens); the bucket before the challenge is marked used (a client told
-- to slow down keeps its solution for the next try).
local challenged = A_CHALLENGE_TTL_MS ~= '0'
if challenged and redis.call('EXISTS', K_USED_CHALLENGE) == 1 then
  return refused(K_COUNTS, {CHALLENGE_USED})
end
if not take_token(K_ADDR_BUCKET, tonumber(cfg.admission_addr_rate or '0'),
    tonumber(cfg.admission_addr_burst or '0'), now) then
  return refused(K_COUNTS, {LIMITED})
end
if challenged then
  redis.call('SET', K_USED_CHALLENGE, '1', 'PX', A_CHALLENGE_TTL_MS)
end
local admitted = {OK, cfg.admission_version or '', tonumber(cfg.end_ms)}
if redis.call('SISMEMBER', K_ADMITTED, A_USER) == 1 then return admitted end
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
return admitted

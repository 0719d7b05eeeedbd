-- admission-terms: what an admission challenge must ask now (read only).
--- keys(slot): cfg
--- args: home_hash
--- ok: difficulty:u32
-- Otherwise: {WRONG_SHARD, shards} | {NOT_OPEN, wait_ms} | {ENDED} | {NOT_FOUND}.
-- No challenge before admission opens: nobody can stock solutions for the opening.
local cfg = hmget(K_CFG, 'start_ms', 'end_ms', 'shard', 'shards', 'admission_opens_ms', 'pow_difficulty')
local now = now_ms()
if not cfg.start_ms then return {NOT_FOUND} end
local moved = not_home(cfg, A_HOME_HASH)
if moved then return moved end
local opens = tonumber(cfg.admission_opens_ms or '0')
if now < opens then return {NOT_OPEN, opens - now} end
if now >= tonumber(cfg.end_ms) then return {ENDED} end
return {OK, tonumber(cfg.pow_difficulty or '0')}

-- Lottery draw, one page at a time: admits up to multiplier × stock registrants at random,
-- `page` per call, so a large event never blocks Redis. The first page closes registration
-- (`drawing`); the caller repeats until the reply says done, which sets `drawn`. Winners are
-- popped from the registrants (SPOP: random, without replacement across pages) into admitted.
--- keys: cfg admitted registrants
--- args: page
--- ok: winners:u64 done:flag
-- Otherwise: {CONFLICT} (already drawn or not a lottery) | {NOT_FOUND}.
local cfg = hmget(K_CFG, 'stock', 'admission_multiplier', 'admission_mode', 'drawn', 'admission_cap')
if not cfg.stock then return {NOT_FOUND} end
if cfg.admission_mode ~= 'lottery' or cfg.drawn == '1' then return {CONFLICT} end
redis.call('HSET', K_CFG, 'drawing', '1')
local cap = admission_cap(cfg)
local left = cap - redis.call('SCARD', K_ADMITTED)
local n = math.min(tonumber(A_PAGE), left)
if n > 0 then
  local drawn = redis.call('SPOP', K_REGISTRANTS, n)
  if #drawn > 0 then redis.call('SADD', K_ADMITTED, unpack(drawn)) end
end
local winners = redis.call('SCARD', K_ADMITTED)
if winners >= cap or redis.call('SCARD', K_REGISTRANTS) == 0 then
  redis.call('HSET', K_CFG, 'drawn', '1')
  return {OK, winners, 1}
end
return {OK, winners, 0}

-- Lottery draw, one page at a time: admits up to multiplier × stock registrants at random,
-- `page` per call, so a large event never blocks Redis. The first page closes registration
-- (`drawing`); the caller repeats until the reply says done, which sets `drawn`. Winners are
-- popped from the registrants (SPOP: random, without replacement across pages) into admitted.
-- KEYS: 1 cfg, 2 admitted, 3 registrants
-- ARGV: 1 page size
-- Reply: {OK, winners so far, done (0/1)} | {CONFLICT} (already drawn or not a lottery)
--        | {NOT_FOUND}
local cfg = hmget(KEYS[1], 'stock', 'admission_multiplier', 'admission_mode', 'drawn')
if not cfg.stock then return {NOT_FOUND} end
if cfg.admission_mode ~= 'lottery' or cfg.drawn == '1' then return {CONFLICT} end
redis.call('HSET', KEYS[1], 'drawing', '1')
local cap = tonumber(cfg.stock) * tonumber(cfg.admission_multiplier)
local left = cap - redis.call('SCARD', KEYS[2])
local n = math.min(tonumber(ARGV[1]), left)
if n > 0 then
  local drawn = redis.call('SPOP', KEYS[3], n)
  if #drawn > 0 then redis.call('SADD', KEYS[2], unpack(drawn)) end
end
local winners = redis.call('SCARD', KEYS[2])
if winners >= cap or redis.call('SCARD', KEYS[3]) == 0 then
  redis.call('HSET', KEYS[1], 'drawn', '1')
  return {OK, winners, 1}
end
return {OK, winners, 0}

-- Lottery draw: admit up to multiplier × stock registrants at random, once.
-- KEYS: 1 cfg, 2 admitted, 3 registrants
-- ARGV: 1 tag prefix
-- Reply: {OK, winners} | {CONFLICT} (already drawn or not a lottery) | {NOT_FOUND}
local cfg = hmget(KEYS[1], 'stock', 'admission_multiplier', 'admission_mode', 'drawn')
if not cfg.stock then return {NOT_FOUND} end
if cfg.admission_mode ~= 'lottery' or cfg.drawn == '1' then return {CONFLICT} end
local cap = tonumber(cfg.stock) * tonumber(cfg.admission_multiplier)
local winners = 0
if cap > 0 then
  local drawn = redis.call('SRANDMEMBER', KEYS[3], cap)
  for i = 1, #drawn, 1000 do
    redis.call('SADD', KEYS[2], unpack(drawn, i, math.min(i + 999, #drawn)))
  end
  winners = #drawn
end
redis.call('HSET', KEYS[1], 'drawn', '1')
return {OK, winners}

-- Lottery draw in one shard, one page at a time: admits this shard's part of the winners (the
-- caller's allotment, `quota`) at random from its registrants, `page` per call, so a large
-- event never blocks Redis. The first page closes registration (`drawing`) and fixes the quota
-- (`draw_quota`): a repeated or concurrent call keeps the first one's. The caller repeats until
-- the reply says done, which sets `drawn`. Winners are popped from the registrants (SPOP:
-- random, without replacement across pages) into admitted.
--- keys(shard): cfg admitted registrants
--- args: page quota
--- ok: winners:u64 done:flag
-- Otherwise: {CONFLICT} (already drawn or not a lottery) | {NOT_FOUND}.
local cfg = hmget(K_CFG, 'stock', 'admission_mode', 'drawn')
if not cfg.stock then return {NOT_FOUND} end
if cfg.admission_mode ~= 'lottery' or cfg.drawn == '1' then return {CONFLICT} end
redis.call('HSET', K_CFG, 'drawing', '1')
redis.call('HSETNX', K_CFG, 'draw_quota', A_QUOTA)
local cap = tonumber(redis.call('HGET', K_CFG, 'draw_quota'))
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

-- The storefront's view of an event: its window, switches and units left, public and read-only.
-- One HMGET and one HVALS (O(shards)): cheap enough for every page load, unlike status.lua,
-- the operator's full view, which also reads the dead letters and every counter.
-- KEYS: 1 cfg, 2 stock (hash shard→units)
-- ARGV: none
-- Reply: {OK, sku, stock, start_ms, end_ms, admission_mode, enabled, warmed, soldout, units left}
--        | {NOT_FOUND}
local cfg = hmget(KEYS[1], 'start_ms', 'end_ms', 'sku', 'stock', 'admission_mode', 'enabled', 'warmed',
  'soldout')
if not cfg.start_ms then return {NOT_FOUND} end
local left = 0
for _, units in ipairs(redis.call('HVALS', KEYS[2])) do left = left + math.max(0, tonumber(units)) end
return {OK, cfg.sku or '', cfg.stock or '0', cfg.start_ms, cfg.end_ms, cfg.admission_mode or 'fcfs',
  cfg.enabled == '1' and 1 or 0, cfg.warmed == '1' and 1 or 0, cfg.soldout == '1' and 1 or 0, left}

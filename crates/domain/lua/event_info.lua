-- The storefront's view of an event: its window, switches, price, admission gate, shard count (buyers send it, so each
-- request goes straight to their home shard) and units left, public and read-only. On the
-- event's own slot: units left and sold out are as the drain last summed the shards.
-- One HMGET and one HVALS (O(shards)): cheap enough for every page load, unlike status.lua,
-- the operator's full view, which also reads the dead letters and every counter.
--- keys(slot): cfg stock
--- args:
--- ok: sku:text stock:u64 start_ms:u64 end_ms:u64 admission_mode:text enabled:flag warmed:flag sold_out:flag stock_left:u64 shards:u32 unit_amount:u64 currency:text admission_opens_ms:u64 pow_difficulty:u32
-- Otherwise: {NOT_FOUND}.
local cfg = hmget(K_CFG, 'start_ms', 'end_ms', 'sku', 'stock', 'admission_mode', 'enabled', 'warmed',
  'soldout', 'shards', 'unit_amount', 'currency', 'admission_opens_ms', 'pow_difficulty')
if not cfg.start_ms then return {NOT_FOUND} end
return {OK, cfg.sku or '', cfg.stock or '0', cfg.start_ms, cfg.end_ms, cfg.admission_mode or 'fcfs',
  cfg.enabled == '1' and 1 or 0, cfg.warmed == '1' and 1 or 0, cfg.soldout == '1' and 1 or 0,
  units_left(K_STOCK), tonumber(cfg.shards) or 1, tonumber(cfg.unit_amount) or 0,
  cfg.currency or '', tonumber(cfg.admission_opens_ms) or 0, tonumber(cfg.pow_difficulty) or 0}

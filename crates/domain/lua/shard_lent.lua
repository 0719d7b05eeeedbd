-- The transfers this shard lent at least `min_age_ms` ago and not yet settled. Read-only.
--- keys(shard): lent
--- args: min_age_ms
--- ok: count:u64 ...
-- Then `count` × (transfer id, to shard, units).
local now, out = now_ms(), {OK, 0}
local entries = redis.call('HGETALL', K_LENT)
for i = 1, #entries, 2 do
  local t = lent_parse(entries[i + 1])
  if now - t.at_ms >= tonumber(A_MIN_AGE_MS) then
    out[2] = out[2] + 1
    for _, v in ipairs({entries[i], t.to, t.units}) do out[#out + 1] = v end
  end
end
return out

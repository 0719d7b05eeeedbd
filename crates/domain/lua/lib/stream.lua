-- The order stream and its consumer group `drain`.

-- The stream keeps only what the drain still needs: entries below the oldest pending one (or,
-- with none pending, below the last delivered one) were acknowledged, landed in Postgres or
-- the dead letters, and go. Entries not yet delivered are never touched.
local function trim_acknowledged(queue)
  local pending = redis.call('XPENDING', queue, 'drain')
  local keep_from = nil
  if tonumber(pending[1]) > 0 then
    keep_from = pending[2]
  else
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', queue)) do
      local info = pairs_to_table(g)
      if info.name == 'drain' then keep_from = info['last-delivered-id'] end
    end
  end
  if keep_from then redis.call('XTRIM', queue, 'MINID', keep_from) end
end

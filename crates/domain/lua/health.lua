-- public health route: the summary of the last full probe, shared by every instance for
-- `ttl_ms`, so that a flood of checks reaches every node and Postgres once per window, not once
-- per call. `read` answers the stored summary ('' when none is fresh); `store` keeps `summary`.
--- keys(registry): health
--- args: action summary ttl_ms
--- ok: summary:text
if A_ACTION == 'store' then
  redis.call('SET', K_HEALTH, A_SUMMARY, 'PX', A_TTL_MS)
  return {OK, A_SUMMARY}
end
return {OK, redis.call('GET', K_HEALTH) or ''}

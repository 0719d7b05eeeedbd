-- drain: remember why an entry failed; it stays pending and is retried, then dead-lettered.
--- keys(shard): drain_errors
--- args: failures...
--- ok:
-- failures: (stream id, error) pairs.
for i = 1, #A_FAILURES, 2 do redis.call('HSET', K_DRAIN_ERRORS, A_FAILURES[i], A_FAILURES[i + 1]) end
return {OK}

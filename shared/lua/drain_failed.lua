-- drain: remember why an entry failed; it stays pending and is retried, then dead-lettered.
-- KEYS: 1 last errors (hash id → error)
-- ARGV: (stream id, error) pairs
-- Reply: {OK}
for i = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return {OK}

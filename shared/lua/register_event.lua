-- Adds an event to the registry the scheduled jobs walk (a key of its own slot).
-- KEYS: 1 registry (set)
-- ARGV: 1 event id
-- Reply: {OK}
redis.call('SADD', KEYS[1], ARGV[1])
return {OK}

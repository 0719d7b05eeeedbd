-- Adds an event to the registry the scheduled jobs walk (a key of its own slot).
--- keys(registry): registry
--- args: event
--- ok:
redis.call('SADD', K_REGISTRY, A_EVENT)
return {OK}

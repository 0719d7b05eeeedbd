-- Token bucket: `burst` is the capacity, `rate` the refill per second; a new bucket starts
-- full. rate <= 0 disables the limit. Returns true when a token was taken.
local function take_token(key, rate, burst, now)
  if rate <= 0 then return true end
  local b = redis.call('HMGET', key, 'tokens', 'ts')
  local tokens, ts = tonumber(b[1]), tonumber(b[2])
  if not tokens then tokens, ts = burst, now end
  tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
  local allowed = tokens >= 1
  if allowed then tokens = tokens - 1 end
  redis.call('HSET', key, 'tokens', tostring(tokens), 'ts', now)
  -- An idle bucket is full again after burst/rate seconds: it may then go.
  redis.call('PEXPIRE', key, math.ceil(burst / rate * 1000) + 1000)
  return allowed
end

-- drain: give the lease back when done, if it is still ours (another holder's is left alone).
-- KEYS: 1 lease
-- ARGV: 1 lease value "owner|fence"
-- Reply: {OK, released (0/1)}
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {OK, 1}
end
return {OK, 0}

-- drain: give the lease back when done, if it is still ours (another holder's is left alone).
--- keys: lease
--- args: lease
--- ok: released:flag
if redis.call('GET', K_LEASE) == A_LEASE then
  redis.call('DEL', K_LEASE)
  return {OK, 1}
end
return {OK, 0}

-- drain: give the lease back when done, if it is still ours (another holder's is left alone).
--- keys(shard): drain_lease
--- args: owner fence
--- ok: released:flag
if lease_held(K_DRAIN_LEASE, A_OWNER, A_FENCE) then
  redis.call('DEL', K_DRAIN_LEASE)
  return {OK, 1}
end
return {OK, 0}

-- jobs route: one run of each job at a time across the fleet. `take` claims the job's lease for
-- `ttl_ms` unless another run holds it (then `held` is 0 and `wait_ms` how long it still does);
-- `give` hands back the caller's own lease (another's is left alone).
--- keys(registry): job_lease(job)
--- args: action owner ttl_ms
--- ok: held:flag wait_ms:u64
if A_ACTION == 'give' then
  if redis.call('GET', K_JOB_LEASE) == A_OWNER then redis.call('DEL', K_JOB_LEASE) end
  return {OK, 1, 0}
end
if redis.call('SET', K_JOB_LEASE, A_OWNER, 'NX', 'PX', A_TTL_MS) then return {OK, 1, 0} end
return {OK, 0, math.max(redis.call('PTTL', K_JOB_LEASE), 0)}

-- Forgets transfers whose credit the receiver confirmed (shard_credit.lua answered).
--- keys(shard): lent
--- args: transfer_ids...
--- ok:
if #A_TRANSFER_IDS > 0 then redis.call('HDEL', K_LENT, unpack(A_TRANSFER_IDS)) end
return {OK}

-- refund job: tells poll what is paid back to an order's buyer (`pending` while any of its
-- payments that paid nothing is not yet refunded, then `refunded`) and for how many payments.
-- Only for an order this shard holds (`told` 0 otherwise).
--- keys(shard): orders refunds
--- args: order_id state payments
--- ok: told:flag
if redis.call('HEXISTS', K_ORDERS, A_ORDER_ID) == 0 then return {OK, 0} end
redis.call('HSET', K_REFUNDS, A_ORDER_ID, A_STATE .. '|' .. A_PAYMENTS)
return {OK, 1}

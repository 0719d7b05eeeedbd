-- seckill schema, version 10: which state of each payment that paid nothing its buyer's poll
-- has been told (the refund job mirrors it into the order's shard in Redis until it matches).
ALTER TABLE provider_payments ADD COLUMN buyer_told text;
CREATE INDEX provider_payments_untold ON provider_payments (payment_id)
    WHERE status <> 'paid' AND buyer_told IS DISTINCT FROM status;

-- seckill schema, version 6: the money the provider took, recorded once per provider payment
-- (its reference, Stripe's payment intent id). A payment of ours is what the buyer was asked;
-- the provider payments naming it are what came in: the one that paid its order, and any other
-- (a second payment for a settled order, another amount or currency, one after the deadline),
-- which owes a refund and never blocks the order's correct payment.
CREATE TABLE provider_payments (
    provider_ref  text    PRIMARY KEY,
    payment_id    text    NOT NULL REFERENCES payments,
    event_id      text    NOT NULL,
    amount        bigint  NOT NULL,
    currency      text    NOT NULL,
    received_ms   bigint  NOT NULL,
    status        text    NOT NULL CHECK (status IN ('paid', 'refund_due')),
    refund_reason text    CHECK (refund_reason IN ('late', 'amount_mismatch', 'duplicate')),
    CHECK ((status = 'refund_due') = (refund_reason IS NOT NULL))
);

CREATE INDEX provider_payments_by_payment ON provider_payments (payment_id);
CREATE INDEX provider_payments_refund_due ON provider_payments (event_id)
    WHERE status = 'refund_due';

-- What payments owed before is now owed by the provider payment that came in.
INSERT INTO provider_payments (provider_ref, payment_id, event_id, amount, currency,
                               received_ms, status, refund_reason)
    SELECT provider_ref, payment_id, event_id, amount, currency, coalesce(confirmed_ms, created_ms),
           CASE status WHEN 'succeeded' THEN 'paid' ELSE 'refund_due' END, refund_reason
    FROM payments WHERE provider_ref IS NOT NULL AND status IN ('succeeded', 'refund_due');
UPDATE payments SET status = 'pending', refund_reason = NULL WHERE status = 'refund_due';
ALTER TABLE payments DROP CONSTRAINT payments_check;
ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN ('pending', 'succeeded'));
DROP INDEX payments_refund_due;
ALTER TABLE payments DROP COLUMN refund_reason;

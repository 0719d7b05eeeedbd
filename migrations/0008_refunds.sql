-- seckill schema, version 8: refunds paid back through the provider. A provider payment that
-- paid nothing owes a refund (`refund_due`); the refund job asks the provider for it
-- (`refund_pending`, the provider's refund id kept) and records it `refunded` once the provider
-- says it succeeded. A refund the provider could not make goes back to `refund_due` and is
-- tried again after a back-off, its last error kept for operators.
ALTER TABLE provider_payments DROP CONSTRAINT provider_payments_status_check;
ALTER TABLE provider_payments DROP CONSTRAINT provider_payments_check;
ALTER TABLE provider_payments ADD CONSTRAINT provider_payments_status_check
    CHECK (status IN ('paid', 'refund_due', 'refund_pending', 'refunded'));
ALTER TABLE provider_payments ADD CONSTRAINT provider_payments_reason_check
    CHECK ((status = 'paid') = (refund_reason IS NULL));
ALTER TABLE provider_payments ADD COLUMN refund_id text;
ALTER TABLE provider_payments ADD COLUMN refund_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE provider_payments ADD COLUMN refund_next_ms bigint NOT NULL DEFAULT 0;
ALTER TABLE provider_payments ADD COLUMN refund_error text;
ALTER TABLE provider_payments ADD COLUMN refunded_ms bigint;
CREATE INDEX provider_payments_refunds_open ON provider_payments (refund_next_ms)
    WHERE status IN ('refund_due', 'refund_pending');

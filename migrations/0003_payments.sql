-- seckill schema, version 3: payments confirmed by a payment provider.
-- An order carries the price it was bought at (the event's price when the drain landed it).
-- The buyer's pay route starts a payment; only the provider's signed webhook marks it (and its
-- order) paid. A confirmation that comes too late, or for another amount, never touches the
-- order: the payment is recorded as owing a refund, for the operators.
ALTER TABLE orders ADD COLUMN amount bigint NOT NULL DEFAULT 0 CHECK (amount >= 0);
ALTER TABLE orders ADD COLUMN currency text NOT NULL DEFAULT '';
ALTER TABLE orders ALTER COLUMN amount DROP DEFAULT;
ALTER TABLE orders ALTER COLUMN currency DROP DEFAULT;
-- The provider's reference of the payment that paid the order.
ALTER TABLE orders ADD COLUMN payment_ref text;

CREATE TABLE payments (
    payment_id    text   PRIMARY KEY,
    order_id      text   NOT NULL UNIQUE REFERENCES orders,
    event_id      text   NOT NULL,
    user_id       text   NOT NULL,
    amount        bigint NOT NULL CHECK (amount > 0),
    currency      text   NOT NULL,
    created_ms    bigint NOT NULL,
    deadline_ms   bigint NOT NULL,
    status        text   NOT NULL
        CHECK (status IN ('pending', 'succeeded', 'refund_due')),
    -- Why a confirmed payment owes a refund.
    refund_reason text
        CHECK (refund_reason IN ('late', 'amount_mismatch')),
    provider_ref  text,
    confirmed_ms  bigint,
    CHECK ((status = 'refund_due') = (refund_reason IS NOT NULL))
);

CREATE INDEX payments_refund_due ON payments (event_id) WHERE status = 'refund_due';

-- Every provider event taken, by the provider's id: a redelivery is answered, never applied
-- twice.
CREATE TABLE provider_events (
    provider_event_id text   PRIMARY KEY,
    received_ms       bigint NOT NULL,
    payment_id        text,
    outcome           text   NOT NULL
);

-- seckill schema, version 1: events, orders, and the stock ledger.
-- Applied once, in file order, by scripts/migrate.sh (local stack) and by the tests; each file
-- runs in one transaction and is recorded in schema_migrations.
--
-- Times are Unix milliseconds (bigint): Spin's Postgres interface cannot read timestamptz.

CREATE TABLE events (
    event_id          text PRIMARY KEY,
    sku               text   NOT NULL,
    initial_stock     bigint NOT NULL CHECK (initial_stock >= 0),
    payment_timeout_s bigint NOT NULL CHECK (payment_timeout_s > 0)
);

-- One row per event. `available` counts units not held by a pending or paid order; the CHECK
-- makes an oversell in Postgres impossible whatever Redis says. The drain updates it once per
-- batch (never once per order: a hot row collapses under per-order updates).
CREATE TABLE stock_ledger (
    event_id  text PRIMARY KEY REFERENCES events,
    available bigint NOT NULL CHECK (available >= 0),
    held      bigint NOT NULL DEFAULT 0 CHECK (held >= 0),      -- pending_payment + paid
    released  bigint NOT NULL DEFAULT 0 CHECK (released >= 0)   -- expired, given back
);

CREATE TABLE orders (
    order_id          text    PRIMARY KEY,
    event_id          text    NOT NULL REFERENCES events,
    user_id           text    NOT NULL,
    shard             integer NOT NULL,
    seq               bigint  NOT NULL,
    status            text    NOT NULL
        CHECK (status IN ('pending_payment', 'paid', 'expired', 'refunded')),
    created_ms        bigint  NOT NULL,
    confirmed_ms      bigint  NOT NULL,
    pay_deadline_ms   bigint  NOT NULL,
    paid_ms           bigint,
    expired_ms        bigint,
    -- Set once the unit is back in its Redis shard; until then timeout-release retries.
    released_in_redis boolean NOT NULL DEFAULT false,
    UNIQUE (event_id, user_id)
);

CREATE INDEX orders_due ON orders (pay_deadline_ms) WHERE status = 'pending_payment';
CREATE INDEX orders_unreleased ON orders (event_id) WHERE status = 'expired' AND NOT released_in_redis;

-- Fencing for the drain lease: a batch commits only if its fencing token is the newest one
-- seen for the event, so a drainer whose lease expired under it cannot write.
CREATE TABLE drain_fences (
    event_id text PRIMARY KEY,
    fence    bigint NOT NULL
);

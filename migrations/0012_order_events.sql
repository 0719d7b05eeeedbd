-- seckill schema, version 12: order events for the shop's systems.
--
-- Every state change of an order writes its event to `order_events` in the change's own
-- transaction: the triggers below, so that no write path can forget one. The deliver-events job
-- sends each to every enabled endpoint as Standard Webhooks say (crates/domain/src/order_events),
-- at least once and in order: an endpoint's cursor moves over events in (transaction, seq)
-- order and only over transactions older than every one still running, so an event committed
-- late behind a higher `seq` is never skipped. An order's later change waits on its earlier
-- one's commit, so its events come in order too. Events are kept `order_events_keep_days`
-- (a setting) and trimmed by the job.

-- An event's `webhook-id` is `msg_<source>_<seq>`: the same on every attempt and replay, so
-- receivers can drop duplicates, and never one an earlier database gave (a database made anew
-- has a new source; one restored keeps its source and its sequence). Made when sent, not kept:
-- the drain writes an event per order, and an index of random ids would cost it.
CREATE TABLE order_events_source (
    one    boolean PRIMARY KEY DEFAULT true CHECK (one),
    source text    NOT NULL DEFAULT replace(gen_random_uuid()::text, '-', '')
);
INSERT INTO order_events_source DEFAULT VALUES;

-- The `webhook-id` of the event numbered `seq`.
CREATE FUNCTION order_event_id(seq bigint) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT 'msg_' || source || '_' || seq FROM order_events_source
$$;

CREATE TABLE order_events (
    seq              bigserial PRIMARY KEY,
    tx               xid8   NOT NULL DEFAULT pg_current_xact_id(),
    type             text   NOT NULL
        CHECK (type IN ('order.landed', 'order.paid', 'order.expired', 'payment.refunded')),
    order_id         text   NOT NULL,
    -- When the change happened.
    created_ms       bigint NOT NULL,
    -- What the event says, as the change left it. Its body is made of these when it is sent
    -- (`order_event_body`), always the same: the drain writes an event per order, and making
    -- JSON there would cost it more than the row does.
    event_id         text   NOT NULL,
    user_id          text   NOT NULL,
    status           text   NOT NULL,
    amount           bigint NOT NULL,
    currency         text   NOT NULL,
    order_created_ms bigint,
    pay_deadline_ms  bigint,
    paid_ms          bigint,
    expired_ms       bigint,
    payment_id       text,
    provider_ref     text,
    refund_id        text,
    refund_reason    text
);

CREATE INDEX order_events_delivery ON order_events (tx, seq);

-- The body sent: {"type", "timestamp", "data"} (api/openapi.yaml, `OrderEvent`).
CREATE FUNCTION order_event_body(e order_events) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'type', e.type,
        'timestamp', to_char(to_timestamp(e.created_ms / 1000.0) AT TIME ZONE 'UTC',
                             'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'data', CASE WHEN e.type = 'payment.refunded' THEN jsonb_build_object(
                    'order_id', e.order_id, 'event_id', e.event_id, 'user_id', e.user_id,
                    'payment_id', e.payment_id, 'provider_ref', e.provider_ref,
                    'refund_id', e.refund_id, 'reason', e.refund_reason,
                    'amount', e.amount, 'currency', e.currency)
                ELSE jsonb_build_object(
                    'order_id', e.order_id, 'event_id', e.event_id, 'user_id', e.user_id,
                    'status', e.status, 'amount', e.amount, 'currency', e.currency,
                    'created_ms', e.order_created_ms, 'pay_deadline_ms', e.pay_deadline_ms,
                    'paid_ms', e.paid_ms, 'expired_ms', e.expired_ms) END)::text
$$;

CREATE FUNCTION order_events_landed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO order_events (type, order_id, created_ms, event_id, user_id, status, amount,
        currency, order_created_ms, pay_deadline_ms, paid_ms, expired_ms)
    SELECT 'order.landed', n.order_id, n.confirmed_ms, n.event_id, n.user_id, n.status, n.amount,
        n.currency, n.created_ms, n.pay_deadline_ms, n.paid_ms, n.expired_ms
    FROM landed n ORDER BY n.shard, n.seq;
    RETURN NULL;
END $$;

CREATE TRIGGER orders_landed AFTER INSERT ON orders
    REFERENCING NEW TABLE AS landed
    FOR EACH STATEMENT EXECUTE FUNCTION order_events_landed();

CREATE FUNCTION order_events_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO order_events (type, order_id, created_ms, event_id, user_id, status, amount,
        currency, order_created_ms, pay_deadline_ms, paid_ms, expired_ms)
    SELECT e.kind, n.order_id, e.at_ms, n.event_id, n.user_id, n.status, n.amount,
        n.currency, n.created_ms, n.pay_deadline_ms, n.paid_ms, n.expired_ms
    FROM changed n
    JOIN before b USING (order_id)
    CROSS JOIN LATERAL (SELECT
        CASE n.status WHEN 'paid' THEN 'order.paid' WHEN 'expired' THEN 'order.expired' END AS kind,
        CASE n.status WHEN 'paid' THEN n.paid_ms WHEN 'expired' THEN n.expired_ms END AS at_ms) e
    WHERE n.status IS DISTINCT FROM b.status AND e.kind IS NOT NULL
    ORDER BY n.order_id;
    RETURN NULL;
END $$;

CREATE TRIGGER orders_changed AFTER UPDATE ON orders
    REFERENCING OLD TABLE AS before NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION order_events_changed();

CREATE FUNCTION order_events_refunded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO order_events (type, order_id, created_ms, event_id, user_id, status, amount,
        currency, payment_id, provider_ref, refund_id, refund_reason)
    SELECT 'payment.refunded', p.order_id, n.refunded_ms, n.event_id, p.user_id, n.status,
        n.amount, n.currency, n.payment_id, n.provider_ref, n.refund_id, n.refund_reason
    FROM changed n
    JOIN before b USING (provider_ref)
    JOIN payments p ON p.payment_id = n.payment_id
    WHERE n.status = 'refunded' AND b.status <> 'refunded'
    ORDER BY n.provider_ref;
    RETURN NULL;
END $$;

CREATE TRIGGER provider_payments_refunded AFTER UPDATE ON provider_payments
    REFERENCING OLD TABLE AS before NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION order_events_refunded();

-- The shop's endpoints. `secrets` sign, newest first: two while a rotation lasts (until
-- `previous_until_ms`), so a receiver that still has the old one keeps verifying.
CREATE TABLE webhook_endpoints (
    endpoint_id       text    PRIMARY KEY,
    url               text    NOT NULL CHECK (url LIKE 'https://%'),
    description       text    NOT NULL DEFAULT '',
    secrets           text[]  NOT NULL CHECK (cardinality(secrets) BETWEEN 1 AND 2),
    previous_until_ms bigint,
    created_ms        bigint  NOT NULL,
    enabled           boolean NOT NULL DEFAULT true,
    disabled_ms       bigint,
    disabled_reason   text,
    -- Delivered up to here, in (tx, seq) order. A new endpoint starts at the events committed
    -- after it was registered.
    cursor_tx         xid8    NOT NULL DEFAULT pg_snapshot_xmin(pg_current_snapshot()),
    cursor_seq        bigint  NOT NULL DEFAULT 0,
    -- The event at the cursor failing: since when, how often, when next.
    failing_since_ms  bigint,
    attempts          integer NOT NULL DEFAULT 0,
    next_attempt_ms   bigint  NOT NULL DEFAULT 0,
    last_error        text,
    -- A run delivering to it holds it until then (one run at a time: two would interleave).
    leased_until_ms   bigint  NOT NULL DEFAULT 0
);

-- Every attempt, for operators (trimmed with the events).
CREATE TABLE webhook_deliveries (
    endpoint_id  text    NOT NULL REFERENCES webhook_endpoints ON DELETE CASCADE,
    seq          bigint  NOT NULL,
    msg_id       text    NOT NULL,
    attempted_ms bigint  NOT NULL,
    status       integer,
    error        text,
    took_ms      bigint  NOT NULL,
    replay       boolean NOT NULL DEFAULT false
);

CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, attempted_ms);

-- Events an operator asked to send again, beside the endpoint's stream.
CREATE TABLE webhook_replays (
    endpoint_id text   NOT NULL REFERENCES webhook_endpoints ON DELETE CASCADE,
    seq         bigint NOT NULL REFERENCES order_events ON DELETE CASCADE,
    PRIMARY KEY (endpoint_id, seq)
);

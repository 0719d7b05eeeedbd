-- seckill schema, version 12: order events for the shop's systems.
--
-- Every state change of an order writes its event to `order_events` in the change's own
-- transaction: the triggers below, so that no write path can forget one. The deliver-events job
-- sends each to every enabled endpoint as Standard Webhooks say (crates/domain/src/order_events),
-- at least once and in order: an endpoint's cursor moves over events in (transaction, seq)
-- order and only over transactions older than every one still running, so an event committed
-- late behind a higher `seq` is never skipped. An order's later change waits on its earlier
-- one's commit, so its events come in order too. Events are kept `order_events_keep_days`
-- (a variable) and trimmed by the job.

CREATE TABLE order_events (
    seq        bigserial PRIMARY KEY,
    tx         xid8   NOT NULL DEFAULT pg_current_xact_id(),
    -- `webhook-id`: the same on every attempt and replay, so receivers can drop duplicates.
    msg_id     text   NOT NULL UNIQUE DEFAULT 'msg_' || replace(gen_random_uuid()::text, '-', ''),
    type       text   NOT NULL
        CHECK (type IN ('order.landed', 'order.paid', 'order.expired', 'payment.refunded')),
    order_id   text   NOT NULL,
    created_ms bigint NOT NULL,
    -- The body sent, whole: {"type", "timestamp", "data"} (api/openapi.yaml, `OrderEvent`).
    payload    text   NOT NULL
);

CREATE INDEX order_events_delivery ON order_events (tx, seq);
CREATE INDEX order_events_age ON order_events (created_ms);

-- The body of an event of `kind` at `at_ms` about `data`.
CREATE FUNCTION order_event_body(kind text, at_ms bigint, data jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'type', kind,
        'timestamp', to_char(to_timestamp(at_ms / 1000.0) AT TIME ZONE 'UTC',
                             'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'data', data)::text
$$;

-- What an order event says about its order.
CREATE FUNCTION order_event_data(o orders) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'order_id', o.order_id, 'event_id', o.event_id, 'user_id', o.user_id,
        'status', o.status, 'amount', o.amount, 'currency', o.currency,
        'created_ms', o.created_ms, 'pay_deadline_ms', o.pay_deadline_ms,
        'paid_ms', o.paid_ms, 'expired_ms', o.expired_ms)
$$;

CREATE FUNCTION order_events_landed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO order_events (type, order_id, created_ms, payload)
    SELECT 'order.landed', n.order_id, n.confirmed_ms,
           order_event_body('order.landed', n.confirmed_ms, order_event_data(n))
    FROM landed n ORDER BY n.shard, n.seq;
    RETURN NULL;
END $$;

CREATE TRIGGER orders_landed AFTER INSERT ON orders
    REFERENCING NEW TABLE AS landed
    FOR EACH STATEMENT EXECUTE FUNCTION order_events_landed();

CREATE FUNCTION order_events_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO order_events (type, order_id, created_ms, payload)
    SELECT e.kind, n.order_id, e.at_ms, order_event_body(e.kind, e.at_ms, order_event_data(n))
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
    INSERT INTO order_events (type, order_id, created_ms, payload)
    SELECT 'payment.refunded', p.order_id, n.refunded_ms,
           order_event_body('payment.refunded', n.refunded_ms, jsonb_build_object(
               'order_id', p.order_id, 'event_id', n.event_id, 'user_id', p.user_id,
               'payment_id', n.payment_id, 'provider_ref', n.provider_ref,
               'refund_id', n.refund_id, 'reason', n.refund_reason,
               'amount', n.amount, 'currency', n.currency))
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

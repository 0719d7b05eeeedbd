-- seckill schema, version 7: each payment's checkout session at the provider. The pay route
-- creates it (the order's own amount, never the buyer's); timeout release expires an open one
-- at the provider before the order's unit goes back, so no payment can complete for a unit
-- that was released.
ALTER TABLE payments ADD COLUMN session_id text UNIQUE;
ALTER TABLE payments ADD COLUMN session_url text;
ALTER TABLE payments ADD COLUMN session_status text
    CHECK (session_status IN ('open', 'complete', 'expired'));
ALTER TABLE payments ADD CHECK ((session_id IS NULL) = (session_status IS NULL));
CREATE INDEX payments_open_sessions ON payments (deadline_ms) WHERE session_status = 'open';

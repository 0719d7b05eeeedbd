-- seckill schema: who changed what. One row per operator's write to an event (create or update,
-- switches and limits, warm-up, deny lists, draw), stored by the admin function after the write
-- was applied; `GET /admin/audit` reads it newest first. Applied by name, not by number: it does
-- not depend on any migration but 0001.
CREATE TABLE operator_audit (
    id       bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at_ms    bigint  NOT NULL,
    operator text    NOT NULL,
    role     text    NOT NULL CHECK (role IN ('viewer', 'operator')),
    method   text    NOT NULL,
    path     text    NOT NULL,
    event_id text    NOT NULL,
    before   jsonb,               -- the event's configuration before (PUT, PATCH)
    after    jsonb,               -- after; the entries added; what the call returned; the error
    status   integer NOT NULL     -- the HTTP status answered
);

-- `GET /admin/audit?event=E`: the newest rows of one event.
CREATE INDEX operator_audit_event ON operator_audit (event_id, id DESC);

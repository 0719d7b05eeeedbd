-- seckill schema, version 9: where the backstop for lost webhooks has read the provider's
-- events up to (Unix seconds of the newest event read, when a run read every page). One row.
CREATE TABLE provider_event_cursor (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    created_s  bigint  NOT NULL
);

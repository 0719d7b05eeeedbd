-- seckill schema: the config center's history. One row per change of an event's configuration
-- (created, updated, switches and limits changed, rolled back), with the whole configuration it
-- left: `GET /admin/events/{id}/versions` lists them, a rollback applies one again as a new
-- row. Applied by name, not by number: it depends on no migration but 0001.
CREATE TABLE config_versions (
    version        bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- grows with each change
    event_id       text    NOT NULL,
    at_ms          bigint  NOT NULL,
    operator       text    NOT NULL,
    change         text    NOT NULL CHECK (change IN ('create', 'update', 'switches', 'rollback')),
    rolled_back_to bigint,          -- the version a rollback applied again
    config         jsonb   NOT NULL -- the configuration after the change (PUT's fields)
);

-- `GET /admin/events/{id}/versions`: the newest rows of one event.
CREATE INDEX config_versions_event ON config_versions (event_id, version DESC);

-- seckill schema, version 2: one drain per stock shard. Each shard of an event has its own
-- order stream in Redis, drained under its own lease; a batch commits only if its fencing
-- token is the newest seen for its (event, shard).
ALTER TABLE drain_fences ADD COLUMN shard integer NOT NULL DEFAULT 0;
ALTER TABLE drain_fences DROP CONSTRAINT drain_fences_pkey;
ALTER TABLE drain_fences ADD PRIMARY KEY (event_id, shard);
ALTER TABLE drain_fences ALTER COLUMN shard DROP DEFAULT;

-- Why an order events endpoint is disabled, as a kind (an operator, `410 Gone`, failing too
-- long) that the console and the CLI say in their own words; a failing endpoint's facts are
-- its own columns (failing_since_ms, attempts, last_error).
ALTER TABLE webhook_endpoints ADD COLUMN disabled_by text
    CHECK (disabled_by IN ('operator', 'gone', 'failing'));
UPDATE webhook_endpoints SET disabled_by = CASE
    WHEN disabled_reason = 'disabled by an operator' THEN 'operator'
    WHEN disabled_reason LIKE '%410 Gone%' THEN 'gone'
    WHEN disabled_reason IS NOT NULL THEN 'failing' END;
ALTER TABLE webhook_endpoints DROP COLUMN disabled_reason;

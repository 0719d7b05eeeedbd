-- seckill schema, version 11: schedulers (the `scheduler` role: the jobs and nothing else)
-- are in the audit too, for the runs a person starts and each scheduler credential's first.
ALTER TABLE operator_audit DROP CONSTRAINT operator_audit_role_check;
ALTER TABLE operator_audit ADD CONSTRAINT operator_audit_role_check
    CHECK (role IN ('viewer', 'operator', 'scheduler'));

#!/usr/bin/env bash
# infra/terraform/files/migrate-locked.sh on a real PostgreSQL (a throwaway cluster on a free
# loopback port): the migrations run as the owner, and the app's role it keeps can read and write
# the tables (those of later migrations too) but not change the schema; a second run is a no-op
# that keeps the role and takes a new password; the migrating user itself is refused as APP_ROLE.
# Prints `migrate_role: N passed, N failed`. Usage: tests/terraform/migrate_role_test.sh
# Exits 2, before any check, when PostgreSQL's initdb or psql is missing.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
bin=$(pg_bin)
{ [ -x "$bin/initdb" ] && command -v psql >/dev/null; } || { echo "migrate_role: PostgreSQL's initdb or psql not found" >&2; exit 2; }
work=$(mktemp -d /tmp/seckill-migrate-role.XXXXXX)
chmod 0755 "$work"
[ "$(id -u)" != 0 ] || chown postgres "$work"
port=$(free_port)
cleanup() { as_pg "$bin/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
as_pg "$bin/initdb" -D "$work/data" -U owner --auth=trust >/dev/null
as_pg "$bin/pg_ctl" -D "$work/data" -l "$work/log" -w -o "-p $port -k $work -c listen_addresses=127.0.0.1" start >/dev/null
as_pg env PGHOST="$work" PGPORT="$port" "$bin/createdb" -U owner seckill
# Password auth for the app's role from here on (trust kept for the owner).
as_pg sh -c "printf 'host all app 127.0.0.1/32 scram-sha-256\nhost all all 127.0.0.1/32 trust\nlocal all all trust\n' >'$work/data/pg_hba.conf'"
as_pg "$bin/pg_ctl" -D "$work/data" reload >/dev/null

owner="postgres://owner@127.0.0.1:$port/seckill"
migrate() { PG_URL=$owner APP_ROLE=app APP_ROLE_PASSWORD=$1 sh "$ROOT/infra/terraform/files/migrate-locked.sh" "$2" >/dev/null; }
as_app() { psql "postgres://app:$1@127.0.0.1:$port/seckill" -X -q -At -v ON_ERROR_STOP=1 -c "$2" >/dev/null 2>&1; }
passed=0 failed=0
check() { # check <what> <command...>: passes when the command succeeds
  local what=$1; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $what" >&2; fi
}
refused() { ! as_app "$@" >/dev/null; }

pw1="it's-a-password-0123"
check "the migrations apply and the role is made" migrate "$pw1" "$ROOT/migrations"
check "the app reads and writes its tables" as_app "$pw1" \
  "INSERT INTO events VALUES ('e1', 'sku', 1, 60); UPDATE events SET sku = 'x'; SELECT count(*) FROM events; DELETE FROM events"
check "the app uses the sequences" as_app "$pw1" "SELECT nextval(pg_get_serial_sequence('operator_audit', 'id'))"
check "the app cannot create a table" refused "$pw1" "CREATE TABLE mine (x int)"
check "the app cannot drop a table" refused "$pw1" "DROP TABLE orders"
check "the app cannot alter a table" refused "$pw1" "ALTER TABLE orders ADD COLUMN x int"

# A later migration: its table is the app's too (default privileges), and the password rotates.
later=$work/later
mkdir "$later" && cp "$ROOT"/migrations/*.sql "$later/"
printf 'CREATE TABLE later_things (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, x int);\n' >"$later/9999_later.sql"
pw2="another-password-4567"
check "a second run applies only the new migration" migrate "$pw2" "$later"
check "the new password works" as_app "$pw2" "INSERT INTO later_things (x) VALUES (1); SELECT count(*) FROM later_things"
check "the old password no longer does" refused "$pw1" "SELECT 1"
check "the owner cannot be the app's role" \
  bash -c "! PG_URL='postgres://owner@127.0.0.1:$port/seckill' APP_ROLE=owner APP_ROLE_PASSWORD=x sh '$ROOT/infra/terraform/files/migrate-locked.sh' '$later' >/dev/null 2>&1"
check "an APP_ROLE that is not an identifier is refused" \
  bash -c "! PG_URL='$owner' APP_ROLE='app; drop' APP_ROLE_PASSWORD=x sh '$ROOT/infra/terraform/files/migrate-locked.sh' '$later' >/dev/null 2>&1"

echo "migrate_role: $passed passed, $failed failed"
[ "$failed" = 0 ]

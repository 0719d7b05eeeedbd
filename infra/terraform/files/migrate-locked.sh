#!/bin/sh
# Applies migrations/*.sql that are not yet in schema_migrations, like scripts/migrate.sh (same
# table, same version names, each file in one transaction), but in ONE psql session holding a
# Postgres advisory lock: instances or Jobs that start together wait for each other instead of
# racing, and the second finds everything applied. Safe to run on every boot.
#
# Usage: PG_URL=postgres://... migrate-locked.sh <migrations-dir>
# POSIX sh (runs in the postgres:*-alpine image too); needs psql >= 10 (\if, \gset).
set -eu
dir=${1:?migrations directory}
: "${PG_URL:?PG_URL must name the database}"
lock="hashtext('seckill.migrations')"

script=$(mktemp)
trap 'rm -f "$script"' EXIT
{
  line() { printf '%s\n' "$*"; } # not echo: dash's echo reads backslashes
  line "SELECT pg_advisory_lock($lock) AS locked \\gset"
  line "SET client_min_messages = warning;"
  line "CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_ms bigint NOT NULL);"
  for f in "$dir"/*.sql; do
    [ -e "$f" ] || continue
    v=$(basename "$f" .sql)
    case $v in *[!A-Za-z0-9_.-]*) echo "migration name not allowed: $v" >&2; exit 1 ;; esac
    line "SELECT NOT EXISTS (SELECT 1 FROM schema_migrations WHERE version = '$v') AS pending \\gset"
    line "\\if :pending"
    line "\\echo 'migration $v'"
    line "BEGIN;"
    line "\\i '$f'"
    line "INSERT INTO schema_migrations VALUES ('$v', (extract(epoch from now()) * 1000)::bigint);"
    line "COMMIT;"
    line "\\endif"
  done
  line "SELECT pg_advisory_unlock($lock) AS unlocked \\gset"
} >"$script"
# The lock is the session's: if a migration fails, psql stops, the session ends, the lock goes.
psql "$PG_URL" -v ON_ERROR_STOP=1 -X -q -f "$script"

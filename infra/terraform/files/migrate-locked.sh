#!/bin/sh
# Applies migrations/*.sql that are not yet in schema_migrations, like scripts/migrate.sh (same
# table, same version names, each file in one transaction), but in ONE psql session holding a
# Postgres advisory lock: instances or Jobs that start together wait for each other instead of
# racing, and the second finds everything applied. Safe to run on every boot.
#
# The migrations run as PG_URL's user, the schema's owner. With APP_ROLE set, the same session
# then keeps the app's own role: created if missing, APP_ROLE_PASSWORD set, and granted what the
# app does and nothing more: CONNECT, USAGE on the schema, SELECT/INSERT/UPDATE/DELETE on its
# tables, USAGE/SELECT on its sequences, and the same by default on what later migrations create
# (default privileges of the owner, who runs them).
#
# Usage: PG_URL=postgres://owner... [APP_ROLE=name APP_ROLE_PASSWORD=...] migrate-locked.sh <migrations-dir>
# POSIX sh (runs in the postgres:*-alpine image too); needs psql >= 10 (\if, \gset).
set -eu
dir=${1:?migrations directory}
: "${PG_URL:?PG_URL must name the database}"
role=${APP_ROLE:-}
case $role in *[!a-z0-9_]* | [!a-z_]*) echo "APP_ROLE must be a lower-case SQL identifier: $role" >&2; exit 1 ;; esac
[ -z "$role" ] || : "${APP_ROLE_PASSWORD:?APP_ROLE needs APP_ROLE_PASSWORD}"
lock="hashtext('seckill.migrations')"

# The script holds the app role's password: private to this user (umask), removed on exit.
umask 077
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
  if [ -n "$role" ]; then
    password=$(printf '%s' "$APP_ROLE_PASSWORD" | sed "s/'/''/g")
    line "SELECT current_database() AS db \\gset"
    line "BEGIN;"
    # Never the migrating user itself: that would change the owner's password.
    line "DO \$\$ BEGIN"
    line "  IF current_user = '$role' THEN RAISE EXCEPTION 'APP_ROLE is the migrating user'; END IF;"
    line "  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$role') THEN CREATE ROLE \"$role\"; END IF;"
    line "END \$\$;"
    line "ALTER ROLE \"$role\" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '$password';"
    line "GRANT CONNECT ON DATABASE :\"db\" TO \"$role\";"
    line "GRANT USAGE ON SCHEMA public TO \"$role\";"
    line "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO \"$role\";"
    line "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO \"$role\";"
    line "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO \"$role\";"
    line "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO \"$role\";"
    line "COMMIT;"
  fi
  line "SELECT pg_advisory_unlock($lock) AS unlocked \\gset"
} >"$script"
# The lock is the session's: if a migration fails, psql stops, the session ends, the lock goes.
psql "$PG_URL" -v ON_ERROR_STOP=1 -X -q -f "$script"

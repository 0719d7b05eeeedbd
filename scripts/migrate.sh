#!/usr/bin/env bash
# Applies migrations/*.sql that are not yet in schema_migrations, each in one transaction.
# Usage: scripts/migrate.sh <postgres-url>
set -euo pipefail
source "$(dirname "$0")/lib.sh"
URL=${1:?postgres url}
psql "$URL" -v ON_ERROR_STOP=1 -qtA -c \
  "CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_ms bigint NOT NULL)"
for f in "$ROOT"/migrations/*.sql; do
  v=$(basename "$f" .sql)
  if [ -z "$(psql "$URL" -qtA -c "SELECT 1 FROM schema_migrations WHERE version = '$v'")" ]; then
    log "migration $v"
    { echo "BEGIN;"; cat "$f"; echo "INSERT INTO schema_migrations VALUES ('$v', (extract(epoch from now()) * 1000)::bigint);"; echo "COMMIT;"; } \
      | psql "$URL" -v ON_ERROR_STOP=1 -q
  fi
done

#!/usr/bin/env bash
# Stops the Redis and PostgreSQL that scripts/up.sh started (data stays in .data/).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
redis-cli -p "${SECKILL_REDIS_PORT:-6379}" shutdown >/dev/null 2>&1 || true
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
if [ -f "$ROOT/.data/pg/postmaster.pid" ]; then
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$PGBIN/pg_ctl" -D "$ROOT/.data/pg" stop -m fast >/dev/null
  else "$PGBIN/pg_ctl" -D "$ROOT/.data/pg" stop -m fast >/dev/null; fi
fi
log "stopped"

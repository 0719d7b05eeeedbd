#!/usr/bin/env bash
# Stops the Redis and PostgreSQL that scripts/up.sh started (data stays in .data/).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
stop_redis "${SECKILL_REDIS_PORT:-6379}"
stop_pg "$ROOT/.data/pg"
log "stopped"

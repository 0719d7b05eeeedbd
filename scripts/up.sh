#!/usr/bin/env bash
# The local stack, like `spin up`: sets up what is missing, starts redis-server and PostgreSQL in
# .data/ on loopback (reused if already running), builds everything and serves the app on
# http://127.0.0.1:3000 until Ctrl-C. Ports: SECKILL_REDIS_PORT (6379), SECKILL_PG_PORT (5432),
# SECKILL_LISTEN (127.0.0.1:3000). Extra arguments go to `seckill-host up`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bash "$ROOT/scripts/setup.sh"
LISTEN=${SECKILL_LISTEN:-127.0.0.1:3000}
DATA="$ROOT/.data"
start_stores "$DATA" "${SECKILL_REDIS_PORT:-6379}" "${SECKILL_PG_PORT:-5432}"

log "building components and host"
build_app

# Local secrets, made once: the demo shop's JWT key, the admission HMAC key, and one operator,
# `local`, whose secret (after `local:operator:`) is the admin token.
if [ ! -f "$DATA/secrets.env" ]; then
  umask 077
  {
    echo "SPIN_VARIABLE_JWT_SECRET=$(secret 32)"
    echo "SPIN_VARIABLE_ADMISSION_SECRET=$(secret 32)"
  } > "$DATA/secrets.env"
fi
if ! grep -q '^SPIN_VARIABLE_OPERATORS=' "$DATA/secrets.env"; then
  echo "SPIN_VARIABLE_OPERATORS=local:operator:$(secret 24)" >> "$DATA/secrets.env"
fi
if ! grep -q '^SPIN_VARIABLE_PAYMENT_WEBHOOK_SECRETS=' "$DATA/secrets.env"; then
  echo "SPIN_VARIABLE_PAYMENT_WEBHOOK_SECRETS=whsec_$(secret 24)" >> "$DATA/secrets.env"
fi
set -a; source "$DATA/secrets.env"; set +a
log "admin token (SPIN_VARIABLE_OPERATORS, after local:operator:) and JWT key: $DATA/secrets.env"

log "serving on http://$LISTEN (Ctrl-C stops the host; scripts/down.sh stops Redis and Postgres)"
exec "$ROOT/target/release/seckill-host" up --manifest "$ROOT/spin.toml" --listen "$LISTEN" "$@"

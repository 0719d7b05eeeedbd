#!/usr/bin/env bash
# The local stack, like `spin up`: sets up what is missing, starts redis-server and PostgreSQL in
# .data/ on loopback (reused if already running), builds everything and serves the app on
# http://127.0.0.1:3000 until Ctrl-C. Ports: SECKILL_REDIS_PORT (6379), SECKILL_PG_PORT (5432),
# SECKILL_LISTEN (127.0.0.1:3000). Extra arguments go to `seckill-host up`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bash "$ROOT/scripts/setup.sh"
REDIS_PORT=${SECKILL_REDIS_PORT:-6379}
PG_PORT=${SECKILL_PG_PORT:-5432}
LISTEN=${SECKILL_LISTEN:-127.0.0.1:3000}
DATA="$ROOT/.data"
start_redis "$REDIS_PORT" "$DATA/redis"
start_pg "$PG_PORT" "$DATA/pg"

bash "$ROOT/scripts/migrate.sh" "postgres://seckill@127.0.0.1:$PG_PORT/seckill?sslmode=disable"

log "building components and host"
build_wasm
(cd "$ROOT" && cargo build --quiet --release -p seckill-host)

# Local secrets, made once: the demo shop's JWT key, the admission HMAC key, the admin token.
if [ ! -f "$DATA/secrets.env" ]; then
  umask 077
  {
    echo "SPIN_VARIABLE_JWT_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    echo "SPIN_VARIABLE_ADMISSION_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    echo "SPIN_VARIABLE_ADMIN_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  } > "$DATA/secrets.env"
fi
set -a; source "$DATA/secrets.env"; set +a
log "admin token and JWT key: $DATA/secrets.env"

export SPIN_VARIABLE_REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
export SPIN_VARIABLE_REDIS_HOST="127.0.0.1:$REDIS_PORT"
export SPIN_VARIABLE_PG_URL="postgres://seckill@127.0.0.1:$PG_PORT/seckill?sslmode=disable"
export SPIN_VARIABLE_PG_HOST="127.0.0.1:$PG_PORT"
log "serving on http://$LISTEN (Ctrl-C stops the host; scripts/down.sh stops Redis and Postgres)"
exec "$ROOT/target/release/seckill-host" up --manifest "$ROOT/spin.toml" --listen "$LISTEN" "$@"

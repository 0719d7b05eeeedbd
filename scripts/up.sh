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
mkdir -p "$DATA/redis"

pg_bin() { local b; b=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1); echo "${b:-$(dirname "$(command -v initdb)")}"; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# Redis: AOF with fsync on every write, so an accepted order survives a crash (ARCHITECTURE.md).
if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  log "starting redis-server on 127.0.0.1:$REDIS_PORT"
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$DATA/redis" --daemonize yes \
    --appendonly yes --appendfsync always --logfile "$DATA/redis/redis.log" >/dev/null
fi

# PostgreSQL: a cluster of our own in .data/pg.
PGBIN=$(pg_bin)
if ! "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; then
  if [ ! -f "$DATA/pg/PG_VERSION" ]; then
    log "initdb $DATA/pg"
    mkdir -p "$DATA/pg"; [ "$(id -u)" = 0 ] && chown postgres: "$DATA/pg"
    as_pg "$PGBIN/initdb" -U postgres -A trust -E UTF8 --locale C -D "$DATA/pg" >/dev/null
  fi
  log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
  as_pg "$PGBIN/pg_ctl" -D "$DATA/pg" -l "$DATA/pg/server.log" -w \
    -o "-p $PG_PORT -k $DATA/pg -c listen_addresses=127.0.0.1" start >/dev/null
fi
psql_pg() { psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 -qtA "$@"; }
[ "$(psql_pg -c "select 1 from pg_roles where rolname='seckill'")" = 1 ] || psql_pg -c "create role seckill login"
[ "$(psql_pg -c "select 1 from pg_database where datname='seckill'")" = 1 ] || psql_pg -c "create database seckill owner seckill"

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

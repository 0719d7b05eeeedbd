# Sourced by the other scripts: shared settings and helpers.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
log() { printf '[seckill] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# cargo that can build wasm32-wasip2: rustup's own toolchain when it has the target, else the
# `wasm` toolchain that scripts/wasm-toolchain.sh built from Debian packages.
wasm_cargo() {
  if rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    cargo "$@"
  elif command -v cargo-wasm >/dev/null 2>&1; then
    cargo-wasm "$@"
  else
    die "no wasm32-wasip2 toolchain: run scripts/setup.sh"
  fi
}

# Builds every guest component: the functions (the deploy build), then, in a build of their
# own so their features stay out of the functions, the tests' components.
build_wasm() {
  (cd "$ROOT" && wasm_cargo build --quiet --target wasm32-wasip2 --release)
  (cd "$ROOT" && wasm_cargo build --quiet --target wasm32-wasip2 --release \
    -p hello -p conformance -p cron-probe -p faulty-jobs)
}

# The newest PostgreSQL's bin directory.
pg_bin() { local b; b=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1); echo "${b:-$(dirname "$(command -v initdb)")}"; }
# Runs a command as `postgres` when we are root (PostgreSQL refuses to run as root).
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# A TCP port nobody listens on right now, on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_redis PORT DIR [redis-server args...]: redis-server on 127.0.0.1:PORT, data and log in
# DIR, AOF with fsync on every write (an accepted order survives a crash, ARCHITECTURE.md),
# reused if already running. Extra arguments override those settings.
start_redis() {
  local port=$1 dir=$2; shift 2
  redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
  mkdir -p "$dir"
  log "starting redis-server on 127.0.0.1:$port"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize yes \
    --appendonly yes --appendfsync always --logfile "$dir/redis.log" --pidfile "$dir/redis.pid" "$@" >/dev/null
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  die "redis-server on port $port did not start ($dir/redis.log)"
}

# start_pg PORT DIR: a PostgreSQL cluster of our own in DIR (initdb when new) on 127.0.0.1:PORT,
# reused if already running, with the role and database `seckill`.
start_pg() {
  local port=$1 dir=$2 bin; bin=$(pg_bin)
  if ! "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
    if [ ! -f "$dir/PG_VERSION" ]; then
      log "initdb $dir"
      mkdir -p "$dir"; [ "$(id -u)" = 0 ] && chown postgres: "$dir"
      as_pg "$bin/initdb" -U postgres -A trust -E UTF8 --locale C -D "$dir" >/dev/null
    fi
    log "starting PostgreSQL on 127.0.0.1:$port"
    as_pg "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
  fi
  local psql_pg=(psql -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1 -qtA)
  [ "$("${psql_pg[@]}" -c "select 1 from pg_roles where rolname='seckill'")" = 1 ] || "${psql_pg[@]}" -c "create role seckill login"
  [ "$("${psql_pg[@]}" -c "select 1 from pg_database where datname='seckill'")" = 1 ] || "${psql_pg[@]}" -c "create database seckill owner seckill"
}

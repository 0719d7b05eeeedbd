# Sourced by the other scripts: shared settings and helpers.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
log() { printf '[seckill] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# skip_or_fail WHY: a check cannot run on this machine (a tool it needs is missing). Under
# CI=true (.ci/run) that fails the run: CI runs every check or says why not. Elsewhere the
# check is skipped, loudly, and the caller goes on.
skip_or_fail() {
  [ "${CI:-}" != true ] || die "$* (CI=true: a check that cannot run is a failure)"
  log "******** SKIPPED: $* ********"
}

# Debian packages, as root or through sudo; `apt-get update` once per script.
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
APT_UPDATED=0
apt_update_once() {
  [ "$APT_UPDATED" = 1 ] && return 0
  log "apt-get update"; $SUDO apt-get update -qq; APT_UPDATED=1
}
# apt_install PACKAGE...: quietly, without recommended packages.
apt_install() {
  apt_update_once
  log "apt-get install $*"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

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

# Builds what serving the app needs: the functions (the deploy build) and the host.
build_app() {
  (cd "$ROOT" && wasm_cargo build --quiet --target wasm32-wasip2 --release)
  (cd "$ROOT" && cargo build --quiet --release -p seckill-host)
}

# The newest PostgreSQL's bin directory.
pg_bin() { local b; b=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1); echo "${b:-$(dirname "$(command -v initdb)")}"; }
# Runs a command as `postgres` when we are root (PostgreSQL refuses to run as root).
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# A TCP port nobody listens on right now, on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_redis PORT DIR: the local stack's redis-server on
# 127.0.0.1:PORT as the sale runs it (infra/redis/durable.conf, as the tests' durable servers
# start), data and log in DIR, a daemon reused if already running.
start_redis() {
  local port=$1 dir=$2
  redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
  mkdir -p "$dir"
  log "starting redis-server on 127.0.0.1:$port"
  redis-server "$ROOT/infra/redis/durable.conf" --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize yes \
    --logfile "$dir/redis.log" --pidfile "$dir/redis.pid" >/dev/null
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

# stop_redis PORT: stops the redis-server on 127.0.0.1:PORT, if one runs.
stop_redis() { redis-cli -p "$1" shutdown >/dev/null 2>&1 || true; }

# stop_pg DIR: stops the PostgreSQL cluster in DIR, if one runs.
stop_pg() {
  [ -f "$1/postmaster.pid" ] || return 0
  as_pg "$(pg_bin)/pg_ctl" -D "$1" -m fast stop >/dev/null
}

# start_stores DIR REDIS_PORT PG_PORT: the app's Redis and PostgreSQL on
# loopback, their data in DIR/redis and DIR/pg (reused if already running), the schema
# migrated, and the SPIN_VARIABLE_REDIS_{URL,ORIGIN} and SPIN_VARIABLE_PG_{URL,HOST} that point the app at them exported.
# The local stack of scripts/up.sh (the tests start theirs from the test kit).
start_stores() {
  local dir=$1 redis_port=$2 pg_port=$3
  start_redis "$redis_port" "$dir/redis"
  start_pg "$pg_port" "$dir/pg"
  local pg_url="postgres://seckill@127.0.0.1:$pg_port/seckill?sslmode=disable"
  bash "$ROOT/scripts/migrate.sh" "$pg_url"
  export SPIN_VARIABLE_REDIS_URL="redis://127.0.0.1:$redis_port"
  export SPIN_VARIABLE_REDIS_ORIGIN="redis://127.0.0.1:$redis_port"
  export SPIN_VARIABLE_PG_URL="$pg_url"
  export SPIN_VARIABLE_PG_HOST="127.0.0.1:$pg_port"
}

# secret [BYTES]: BYTES random bytes (32 by default), in hex.
secret() { head -c "${1:-32}" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

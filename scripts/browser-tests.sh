#!/usr/bin/env bash
# The storefront and the operator console in a real browser: headless Debian chromium driven by
# playwright-core (tests/browser/run.mjs) against the real local stack, which this script starts
# on free loopback ports in a temp dir — redis-server, PostgreSQL, the host serving spin.toml
# with the demo login on and the cron triggers off (the tests drain by hand) — and stops again.
# Screenshots of every state go to target/browser-artifacts/. Skips (exit 0) without chromium.
# Ends with `browser: N passed, N failed`; exits non-zero when a test failed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
CHROMIUM=${SECKILL_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  log "browser tests skipped: no chromium at $CHROMIUM (scripts/setup.sh installs Debian's chromium)"
  echo "browser: 0 passed, 0 failed (skipped: no chromium)"
  exit 0
fi
[ -d tests/browser/node_modules/playwright-core ] ||
  (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent)

log "building the web component, the functions and the host"
wasm_cargo build --quiet --target wasm32-wasip2 --release
cargo build --quiet --release -p seckill-host

WORK=$(mktemp -d); chmod 755 "$WORK"
REDIS_PORT=$(free_port); PG_PORT=$(free_port); HTTP_PORT=$(free_port)
HOST_PID=""
# The EXIT trap: stopping the servers must never change the script's status (a host killed
# here "fails" its `wait` with 143, which under `set -e` would become the script's status).
stop() {
  if [ -n "$HOST_PID" ]; then
    kill "$HOST_PID" 2>/dev/null || true
    wait "$HOST_PID" 2>/dev/null || true
  fi
  redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
  if [ -f "$WORK/pg/PG_VERSION" ]; then
    as_pg "$(pg_bin)/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap stop EXIT
start_redis "$REDIS_PORT" "$WORK/redis" --appendonly no --save ''
start_pg "$PG_PORT" "$WORK/pg"
PG_URL="postgres://seckill@127.0.0.1:$PG_PORT/seckill?sslmode=disable"
bash scripts/migrate.sh "$PG_URL"

secret() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
ADMIN_TOKEN=$(secret)
export SPIN_VARIABLE_REDIS_URL="redis://127.0.0.1:$REDIS_PORT" SPIN_VARIABLE_REDIS_HOST="127.0.0.1:$REDIS_PORT"
export SPIN_VARIABLE_PG_URL="$PG_URL" SPIN_VARIABLE_PG_HOST="127.0.0.1:$PG_PORT"
export SPIN_VARIABLE_JWT_SECRET=$(secret) SPIN_VARIABLE_ADMISSION_SECRET=$(secret)
export SPIN_VARIABLE_ADMIN_TOKEN=$ADMIN_TOKEN SPIN_VARIABLE_DEMO_LOGIN=true
target/release/seckill-host up --manifest spin.toml --listen "127.0.0.1:$HTTP_PORT" --no-cron \
  >"$WORK/host.log" 2>&1 &
HOST_PID=$!
for _ in $(seq 200); do curl -sf "http://127.0.0.1:$HTTP_PORT/api/time" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$HTTP_PORT/api/time" >/dev/null || { cat "$WORK/host.log" >&2; die "the host did not start"; }

log "browser tests against http://127.0.0.1:$HTTP_PORT"
status=0
SECKILL_URL="http://127.0.0.1:$HTTP_PORT" SECKILL_ADMIN_TOKEN=$ADMIN_TOKEN SECKILL_CHROMIUM=$CHROMIUM \
  SECKILL_ARTIFACTS="$ROOT/target/browser-artifacts" node tests/browser/run.mjs "$@" || status=$?
[ $status = 0 ] || { log "host log:"; tail -n 40 "$WORK/host.log" >&2; }
exit $status

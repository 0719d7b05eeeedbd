#!/usr/bin/env bash
# The storefront and the operator console in a real browser: headless Debian chromium driven by
# playwright-core (tests/browser/run.mjs) against the real local stack, which this script starts
# on free loopback ports in a temp dir — redis-server, PostgreSQL, the host serving spin.toml
# with the demo login on and the cron triggers off (the tests drain by hand), and a payment
# provider's sandbox checkout (`seckill-bench provider`) confirming payments to the host's
# webhook — and stops again.
# Screenshots of every state go to target/browser-artifacts/. Without chromium, node, npm or
# playwright-core the tests are skipped, saying so (a failure under CI=true: skip_or_fail).
# Ends with `browser: N passed, N failed`; exits non-zero when a test failed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
CHROMIUM=${SECKILL_CHROMIUM:-/usr/bin/chromium}
# A tool missing: skipped locally, a failure under CI=true.
skip() {
  skip_or_fail "browser tests: $1 (scripts/setup.sh installs them)"
  echo "browser: 0 passed, 0 failed (skipped: $1)"
  exit 0
}
[ -x "$CHROMIUM" ] || skip "no chromium at $CHROMIUM"
command -v node >/dev/null 2>&1 || skip "no node"
command -v npm >/dev/null 2>&1 || skip "no npm"
[ -d tests/browser/node_modules/playwright-core ] ||
  (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent) ||
  skip "no playwright-core (npm ci in tests/browser failed)"

# The test command has just built both, for its package set: building the host again alone
# (`-p seckill-host`) would unify fewer features and rebuild wasmtime and Cranelift for nothing.
if [ -z "${SECKILL_ALREADY_BUILT:-}" ]; then
  log "building the functions, the host and the provider sandbox"
  (cd "$ROOT" && wasm_cargo build --quiet --target wasm32-wasip2 --release)
  cargo build --quiet --release -p seckill-host -p seckill-bench --bin seckill-host --bin seckill-bench
fi

WORK=$(mktemp -d); chmod 755 "$WORK"
REDIS_PORT=$(free_port); PG_PORT=$(free_port); HTTP_PORT=$(free_port); PROVIDER_PORT=$(free_port)
HOST_PID=""; PROVIDER_PID=""
# The EXIT trap: stopping the servers must never change the script's status (a host killed
# here "fails" its `wait` with 143, which under `set -e` would become the script's status).
stop() {
  [ -z "$PROVIDER_PID" ] || kill "$PROVIDER_PID" 2>/dev/null || true
  if [ -n "$HOST_PID" ]; then
    kill "$HOST_PID" 2>/dev/null || true
    wait "$HOST_PID" 2>/dev/null || true
  fi
  stop_redis "$REDIS_PORT" nosave
  stop_pg "$WORK/pg" immediate 2>/dev/null || true
  rm -rf "$WORK"
}
trap stop EXIT
start_stores "$WORK" "$REDIS_PORT" "$PG_PORT" --appendonly no --save ''

ADMIN_TOKEN=$(secret 24) VIEWER_TOKEN=$(secret 24)
export SPIN_VARIABLE_JWT_SECRET=$(secret 24) SPIN_VARIABLE_ADMISSION_SECRET=$(secret 24)
WEBHOOK_SECRET=whsec_$(secret 24)
PROVIDER_URL="http://127.0.0.1:$PROVIDER_PORT"
export SPIN_VARIABLE_OPERATORS=browser:operator:$ADMIN_TOKEN,watcher:viewer:$VIEWER_TOKEN SPIN_VARIABLE_PAYMENT_WEBHOOK_SECRETS=$WEBHOOK_SECRET
export SPIN_VARIABLE_SETTINGS="demo_login=true,payment_checkout_url=$PROVIDER_URL/checkout"
target/release/seckill-bench provider --listen "127.0.0.1:$PROVIDER_PORT" \
  --webhook "http://127.0.0.1:$HTTP_PORT/api/payments/webhook" --secret "$WEBHOOK_SECRET" \
  >"$WORK/provider.log" 2>&1 &
PROVIDER_PID=$!
target/release/seckill-host up --manifest spin.toml --listen "127.0.0.1:$HTTP_PORT" --no-cron \
  >"$WORK/host.log" 2>&1 &
HOST_PID=$!
for _ in $(seq 200); do curl -sf "http://127.0.0.1:$HTTP_PORT/api/time" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$HTTP_PORT/api/time" >/dev/null || { cat "$WORK/host.log" >&2; die "the host did not start"; }

log "browser tests against http://127.0.0.1:$HTTP_PORT"
status=0
SECKILL_URL="http://127.0.0.1:$HTTP_PORT" SECKILL_ADMIN_TOKEN=$ADMIN_TOKEN SECKILL_VIEWER_TOKEN=$VIEWER_TOKEN SECKILL_CHROMIUM=$CHROMIUM \
  SECKILL_PROVIDER_URL=$PROVIDER_URL SECKILL_REDIS_URL=$SPIN_VARIABLE_REDIS_URL \
  SECKILL_ARTIFACTS="$ROOT/target/browser-artifacts" node tests/browser/run.mjs "$@" || status=$?
[ $status = 0 ] || { log "host log:"; tail -n 40 "$WORK/host.log" >&2; }
exit $status

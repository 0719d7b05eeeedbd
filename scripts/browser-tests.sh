#!/usr/bin/env bash
# The storefront and the operator console in a real browser: headless Debian chromium driven by
# playwright-core (tests/browser/run.mjs) against the real local stack, which `seckill-dev
# stack` starts from the test kit on free loopback ports — redis-server, PostgreSQL, the host
# serving spin.toml with the demo login on and the cron triggers off (the tests drain by hand),
# and a payment provider's sandbox checkout confirming payments to the host's webhook — and
# stops again.
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
  cargo build --quiet --release -p seckill-host -p seckill-dev --bin seckill-host --bin seckill-dev
fi

log "browser tests"
exec target/release/seckill-dev stack --host-log "$ROOT/target/browser-artifacts/host.log" -- \
  env SECKILL_CHROMIUM="$CHROMIUM" SECKILL_ARTIFACTS="$ROOT/target/browser-artifacts" \
  node tests/browser/run.mjs "$@"

#!/usr/bin/env bash
# The test command: sets up what is missing, builds every component, runs the whole suite, then
# runs the sale and order tests again over spin.http.toml and over the REST transport, then checks every request
# and response the suite exchanged against api/openapi.yaml, then runs the Terraform checks
# (skipped, saying so, where Terraform is missing).
# The tests start their own redis-server and PostgreSQL on free loopback ports.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
log "building the wasm components"
build_wasm
packages=(-p seckill-host -p seckill-domain -p seckill-spin-edge -p seckill-native -p seckill-testkit -p seckill-tests -p seckill-bench -p web -p seckill-admin)
export SECKILL_API_RECORD="$ROOT/target/api-record"
rm -rf "$SECKILL_API_RECORD"
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --release --no-fail-fast "${packages[@]}" "$@"
else
  cargo test --release --no-fail-fast "${packages[@]}" "$@"
fi
# The sale tests again over the manifest every platform accepts (HTTP triggers only). The same
# package set each time, so cargo unifies the same features and rebuilds nothing. Only the first
# pass records exchanges for the OpenAPI check: the others repeat the same API.
log "the sale and order tests over spin.http.toml"
if command -v cargo-nextest >/dev/null 2>&1; then
  SECKILL_MANIFEST=spin.http.toml env -u SECKILL_API_RECORD cargo nextest run --release --no-fail-fast "${packages[@]}" \
    -E 'binary(sale) | binary(orders) | binary(app_basics) | binary(script_keys)' "$@"
else
  for t in sale orders app_basics script_keys; do
    SECKILL_MANIFEST=spin.http.toml env -u SECKILL_API_RECORD cargo test --release --no-fail-fast -p seckill-tests --test "$t" "$@"
  done
fi
# And over the Upstash REST transport (a REST facade in front of each test's redis-server);
# the tests that spread events over several nodes place them by URL and stay on Redis.
log "the sale and order tests over the REST transport"
if command -v cargo-nextest >/dev/null 2>&1; then
  SECKILL_TRANSPORT=rest env -u SECKILL_API_RECORD cargo nextest run --release --no-fail-fast "${packages[@]}" \
    -E 'binary(sale) | (binary(orders) & !test(/three_redis_nodes|stuck_event/))' "$@"
else
  for t in sale orders; do
    SECKILL_TRANSPORT=rest env -u SECKILL_API_RECORD cargo test --release --no-fail-fast -p seckill-tests --test "$t" "$@" \
      -- --skip three_redis_nodes --skip stuck_event
  done
fi
bash "$ROOT/scripts/browser-tests.sh"
log "checking the recorded exchanges against api/openapi.yaml"
python3 "$ROOT/scripts/check-openapi.py" "$SECKILL_API_RECORD"
log "Terraform checks"
bash "$ROOT/scripts/terraform-checks.sh"

#!/usr/bin/env bash
# The benchmark suite: builds everything in release and prints the table (never part of CI).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bash "$ROOT/scripts/setup.sh"
command -v redis-benchmark >/dev/null 2>&1 || log "redis-benchmark missing: its row will be empty"
build_wasm
# The outside reference row runs `wasmtime serve`: wasmtime-cli is compiled once, on demand,
# into .data/tools (15-25 min on 2 cores; never in CI). SECKILL_BENCH_WASMTIME=0 skips it.
WASMTIME_CLI_VERSION=48.0.8
if [ "${SECKILL_BENCH_WASMTIME:-1}" = 1 ] \
  && ! "$ROOT/.data/tools/bin/wasmtime" --version 2>/dev/null | grep -q " $WASMTIME_CLI_VERSION "; then
  log "installing wasmtime-cli $WASMTIME_CLI_VERSION for the reference row (once)"
  cargo install --locked --root "$ROOT/.data/tools" --target-dir "$ROOT/target/wasmtime-cli" \
    "wasmtime-cli@$WASMTIME_CLI_VERSION" || log "wasmtime-cli did not install: its row will be empty"
fi
(cd "$ROOT" && cargo build --quiet --release -p seckill-host -p seckill-bench)
exec "$ROOT/target/release/seckill-bench" suite "$@"

#!/usr/bin/env bash
# The benchmark suite: builds everything in release and prints the table (never part of CI).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bash "$ROOT/scripts/setup.sh"
command -v redis-benchmark >/dev/null 2>&1 || log "redis-benchmark missing: its row will be empty"
build_wasm
(cd "$ROOT" && cargo build --quiet --release -p seckill-host -p seckill-bench)
exec "$ROOT/target/release/seckill-bench" suite "$@"

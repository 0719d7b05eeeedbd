#!/usr/bin/env bash
# A simulated flash sale end to end on the local machine: sets up what is missing, starts its
# own Redis (AOF always) and PostgreSQL on free ports, the host with its cron triggers, and
# runs the sale. Prints a report (oversold and lost must be 0) and writes target/demo/.
# Flags: --users N --stock N --shards N --nodes N --payment-timeout-s N --pay-share F --out DIR --rest
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bash "$ROOT/scripts/setup.sh"
build_wasm
(cd "$ROOT" && cargo build --quiet --release -p seckill-host -p seckill-bench)
cd "$ROOT"
exec "$ROOT/target/release/seckill-bench" demo "$@"

#!/usr/bin/env bash
# The test command: sets up what is missing, checks that every path a document names exists,
# builds every component, runs the whole suite once
# (over spin.toml, with Redis reached over its own protocol through the host's pooled
# connections), then again, over spin.http.toml, over the Upstash REST transport and over three
# Redis nodes, the tests whose outcome those can change (modules named for those runs), then a
# small demo sale that checks its own report, then checks the
# exchanges of the first pass against api/openapi.yaml (every kind, up to 1,000 of each) while
# the browser tests, the Terraform checks and the alert rules' checks run (all at once). Under CI=true (.ci/run) a check whose tool is missing fails the run; elsewhere it is
# skipped, saying so (lib.sh's skip_or_fail).
# The tests start their own redis-server and PostgreSQL on free loopback ports. Arguments go to
# every test run (e.g. a filter).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
log "every path the documents, scripts and Terraform name exists"
python3 "$ROOT/scripts/check-paths.py"
log "building the wasm components"
build_wasm

# Every run takes the same package set, so cargo unifies the same features and rebuilds nothing
# between runs.
PACKAGES=(-p seckill-host -p seckill-domain -p seckill-redis-reply -p seckill-spin-edge -p seckill-native -p seckill-testkit
  -p seckill-tests -p seckill-bench -p seckill-dev -p web -p seckill-admin)
ARGS=("$@")

# The suite's switches (tools/testkit/src/suite_runs.rs), set for every run: the first run takes
# these, each later run changes one.
SWITCHES=(SECKILL_MANIFEST=spin.toml SECKILL_TRANSPORT=redis SECKILL_REDIS_NODES=1)

# run_tests [NAME=VALUE...] [-- MODULE...]: with SWITCHES and then NAME=VALUE in the
# environment, every test of PACKAGES, or only the tests in a module named MODULE (at any depth:
# `tokens::over_rest::…`); through cargo-nextest (a filterset), or cargo test where nextest
# could not be installed.
run_tests() {
  local envs=("${SWITCHES[@]}") modules=() m
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  if [ $# -gt 0 ]; then shift; modules=("$@"); fi
  if command -v cargo-nextest >/dev/null 2>&1; then
    local expr="" filter=()
    for m in "${modules[@]}"; do expr+="${expr:+ | }test(/(^|::)$m::/)"; done
    [ -z "$expr" ] || filter=(-E "$expr")
    env "${envs[@]}" cargo nextest run --release --no-fail-fast "${PACKAGES[@]}" "${filter[@]}" "${ARGS[@]}"
  else
    local names=()
    for m in "${modules[@]}"; do names+=("$m::"); done
    [ ${#names[@]} = 0 ] || names=(-- "${names[@]}")
    env "${envs[@]}" cargo test --release --no-fail-fast "${PACKAGES[@]}" "${ARGS[@]}" "${names[@]}"
  fi
}

# The tests, the host's binary (which the host_runtime and browser tests run) and the bench's
# (the demo's), in one build:
# with the package set the test runs take, nothing is built twice.
log "building the host and the tests"
cargo build --release "${PACKAGES[@]}" --tests --bin seckill-host --bin seckill-bench --bin seckill-dev

# 1. Everything, once. Only this run records its exchanges for the OpenAPI check: the other
#    runs repeat the same API.
RECORD="$ROOT/target/api-record"
rm -rf "$RECORD"
log "the whole suite"
run_tests "SECKILL_API_RECORD=$RECORD"

# 2–4. Each switch changed alone, over the tests whose outcome it can change: those live in a
#    module named for the runs that repeat them (`over_http_manifest`, `over_rest`,
#    `over_nodes`, `over_rest_and_nodes`, each saying why), so a new test there joins its runs.
log "over spin.http.toml (the job routes instead of the cron triggers)"
run_tests SECKILL_MANIFEST=spin.http.toml -- over_http_manifest
log "over the REST transport (replies read back as JSON, failures mapped, NOSCRIPT)"
run_tests SECKILL_TRANSPORT=rest -- over_rest over_rest_and_nodes
log "over three Redis nodes (every event's shards and every buyer's home spread over them)"
run_tests SECKILL_REDIS_NODES=3 -- over_nodes over_rest_and_nodes

# 5. The main job, small: a whole sale as people live it (scripts/demo.sh's program, 2,000
#    buyers for 200 units), which fails on its own report: oversold, lost or drift not 0, no
#    payment through, or more than its stated share of requests without a response.
log "the demo, small: 2,000 buyers for 200 units"
"$ROOT/target/release/seckill-bench" demo --users 2000 --stock 200 --out "$ROOT/target/demo-small"

# The last checks share nothing (the browser tests start their own servers; the OpenAPI check
# reads the record; the Terraform checks plan offline; promtool reads the rules) and each waits on something (the
# browser, Python, Terraform) much of the time, so they run at once, each into its own log,
# printed whole when it ends.
CHECK_LOGS="$ROOT/target/check-logs"
mkdir -p "$CHECK_LOGS"
check_in_background() { # NAME COMMAND...: runs COMMAND, its output in $CHECK_LOGS/NAME.log
  local name=$1; shift
  log "$name (in the background, $CHECK_LOGS/$name.log)"
  "$@" >"$CHECK_LOGS/$name.log" 2>&1 &
  CHECKS+=("$name:$!")
}
CHECKS=()
check_in_background openapi python3 "$ROOT/scripts/check-openapi.py" "$RECORD"
check_in_background terraform bash "$ROOT/scripts/terraform-checks.sh"
check_in_background prometheus bash "$ROOT/scripts/prometheus-checks.sh"
failed=()
SECKILL_ALREADY_BUILT=1 bash "$ROOT/scripts/browser-tests.sh" || failed+=(browser)
for check in "${CHECKS[@]}"; do
  rc=0; wait "${check#*:}" || rc=$?
  log "${check%%:*} check: exit $rc"
  cat "$CHECK_LOGS/${check%%:*}.log"
  [ "$rc" = 0 ] || failed+=("${check%%:*}")
done
[ ${#failed[@]} = 0 ] || die "failed: ${failed[*]}"

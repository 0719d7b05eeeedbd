#!/usr/bin/env bash
# The test command: sets up what is missing, builds every component, runs the whole suite once
# (over spin.toml, with Redis reached over its own protocol through the host's pooled
# connections), then again, over spin.http.toml, over the Upstash REST transport and over three
# Redis nodes, the tests whose outcome those can change (the subsets below say why each covers
# its difference), then a small demo sale that checks its own report, then checks the
# exchanges of the first pass against api/openapi.yaml (every kind, up to 1,000 of each) while
# the browser tests, the Terraform checks and the alert rules' checks run (all at once). Under CI=true (.ci/run) a check whose tool is missing fails the run; elsewhere it is
# skipped, saying so (lib.sh's skip_or_fail).
# The tests start their own redis-server and PostgreSQL on free loopback ports. Arguments go to
# every test run (e.g. a filter).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
log "building the wasm components"
build_wasm

# Every run takes the same package set, so cargo unifies the same features and rebuilds nothing
# between runs.
PACKAGES=(-p seckill-host -p seckill-domain -p seckill-spin-edge -p seckill-native -p seckill-testkit
  -p seckill-tests -p seckill-bench -p web -p seckill-admin)
ARGS=("$@")

# run_tests [NAME=VALUE...] [-- BINARY::TEST...]: with NAME=VALUE in the environment, every test
# of PACKAGES, or only each TEST (a function name, in whichever module) of the test binary BINARY
# (tests/tests/BINARY.rs or tests/tests/BINARY/); through cargo-nextest (the tests as a filter
# expression), or cargo test where nextest could not be installed.
run_tests() {
  local envs=() tests=() t
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  if [ $# -gt 0 ]; then shift; tests=("$@"); fi
  for t in "${tests[@]}"; do # a renamed test must not drop out of its subset unnoticed
    grep -rqs "fn ${t#*::}()" "$ROOT/tests/tests/${t%%::*}.rs" "$ROOT/tests/tests/${t%%::*}/" ||
      die "test.sh names $t: no such test"
  done
  if command -v cargo-nextest >/dev/null 2>&1; then
    local expr="" filter=()
    for t in "${tests[@]}"; do expr+="${expr:+ | }(binary(=${t%%::*}) & test(/(^|::)${t#*::}\$/))"; done
    [ -z "$expr" ] || filter=(-E "$expr")
    env "${envs[@]}" cargo nextest run --release --no-fail-fast "${PACKAGES[@]}" "${filter[@]}" "${ARGS[@]}"
  else
    local targets=() names=()
    for t in "${tests[@]}"; do targets+=(--test "${t%%::*}"); names+=("${t#*::}"); done
    [ ${#names[@]} = 0 ] || names=(-- "${names[@]}") # a substring: the module path may precede it
    env "${envs[@]}" cargo test --release --no-fail-fast "${PACKAGES[@]}" "${targets[@]}" "${ARGS[@]}" "${names[@]}"
  fi
}

# The tests, the host's binary (which the host_runtime and browser tests run) and the bench's
# (the demo's), in one build:
# with the package set the test runs take, nothing is built twice.
log "building the host and the tests"
cargo build --release "${PACKAGES[@]}" --tests --bin seckill-host --bin seckill-bench

# 1. Everything, once. Only this run records its exchanges for the OpenAPI check: the other
#    runs repeat the same API.
RECORD="$ROOT/target/api-record"
rm -rf "$RECORD"
log "the whole suite"
run_tests "SECKILL_API_RECORD=$RECORD"

# 2. spin.http.toml, the manifest every platform accepts. It is spin.toml less the cron triggers
#    and the three components only they run (scripts/manifests.py), with `poll_drain_ms`
#    defaulting to 1000: the same HTTP routes and the same component for each, so the sale path
#    cannot tell the two apart. What differs is the app the host loads and the way the
#    scheduled work gets done: the job routes drain, release and reconcile (the cron
#    components are gone), and the waiting buyers' polls carry the drain. The first run already
#    covers, on spin.http.toml whatever SECKILL_MANIFEST says: the derivation and a sale drained
#    through the job route (app_basics::the_cron_free_manifest_is_derived_and_serves_a_sale),
#    the poll-carried drain at the manifest's own default and the job routes' budgets and keys
#    (schedulers.rs). Here, over spin.http.toml:
#    - a whole sale (120 units, 150 buyers) drained, paid, polled and reconciled through the job
#      routes, with the books checked (Postgres = accepted orders, ledger, no drift);
#    - a sale along every path that reaches Redis, every job route included (drain with a
#      refused order retried then dead-lettered, timeout release of an unpaid order, reconcile
#      with a drift): every script of shared/lua/ runs in the app this manifest makes.
HTTP_MANIFEST_TESTS=(
  orders::the_drain_lands_every_order_once_and_poll_shows_it
  script_keys::scripts_touch_only_the_keys_they_are_given
)
log "over spin.http.toml: a whole sale and the job routes"
run_tests SECKILL_MANIFEST=spin.http.toml -- "${HTTP_MANIFEST_TESTS[@]}"

# 3. The Upstash REST transport (a REST facade in front of each test's redis-server). The
#    scripts are the same bytes either way: what differs is how a call reaches Redis (one
#    HTTPS request over pooled outbound connections), how its reply is read back (JSON, base64)
#    and how a failure is mapped (`400 {"error"}`, an unreachable host, NOSCRIPT). What only
#    REST has (pooling, the token, allowed hosts, health, EVAL after SCRIPT FLUSH) is
#    rest_transport.rs, always over REST in the first run. Here, over REST:
#    - a representative whole sale: 2 × 10,000 buyers, 512 at once, for 1,000 units over 8
#      shards, with the invariants (exactly the stock sold, nobody twice, no shard below zero,
#      every refusal counted) — the pooled connections under a spike;
#    - every refusal a script answers, mapped to its code and header: tokens (not the buyer's, replayed,
#      expired, foreign), the window (`too_early` with Retry-After, `sale_ended`), unknown
#      events, conflicts, both rate limits and their refill, poll's states, the lottery,
#      `sale_paused`, `denied`; a script error as 500 `internal` and an unreachable node as 503
#      `unavailable` with Retry-After;
#    - NOSCRIPT: each script's first call goes EVALSHA → NOSCRIPT → EVAL, and after that each
#      buy, poll, admission and precheck is exactly one EVALSHA;
#    - the order path: drain, pay, poll and reconcile with the books checked; pay racing
#      timeout release at every deadline (`order_expired`, both outcomes); one event's broken
#      data reported by the jobs with Redis's own error text while the others go on;
#    - every script of shared/lua/ once, each reply read back over REST.
#    Left out: tests of what Redis or Postgres decide whatever the transport (the other sale
#    sizes and shard spreads, repeated clicks, refusal counts out of the AOF, leases, stream
#    trimming, Postgres faults), of the host alone (the 64 MiB body), and of the Redis
#    connection itself (reconnecting after a Redis restart); the multi-node tests place events
#    by URL, which the facades change.
REST_TESTS=(
  sale::ten_thousand_buyers_eight_shards
  sale::a_purchase_token_not_issued_to_the_buyer_is_403_and_changes_nothing
  sale::a_replayed_purchase_token_is_409_and_changes_nothing
  sale::an_expired_purchase_token_is_403_and_changes_nothing
  sale::before_the_start_admission_is_granted_and_precheck_is_425_with_retry_after
  sale::after_the_end_admission_is_410_sale_ended
  sale::an_unknown_event_is_404_event_not_found
  sale::moving_the_end_before_the_start_is_409_and_changes_nothing
  sale::the_user_rate_limit_refuses_a_burst_and_refills
  sale::the_event_buy_rate_limit_refuses_a_burst_and_the_refused_token_works_after_refill
  sale::poll_says_none_before_a_buy_queued_after_it_and_sold_out_to_the_rest
  sale::a_lottery_admits_exactly_the_drawn_winners
  sale::a_paused_sale_is_503_sale_paused_until_resumed
  sale::a_denied_user_is_403_denied
  sale::a_script_failing_on_the_data_is_500_internal_without_retry_advice_or_detail
  sale::an_unreachable_redis_is_503_unavailable_with_retry_after
  sale::one_redis_command_per_buy_poll_and_precheck
  orders::the_drain_lands_every_order_once_and_poll_shows_it
  orders::a_signed_confirmation_pays_once_and_a_redelivery_is_a_duplicate
  orders::payment_racing_timeout_release_never_both
  orders::one_broken_event_fails_alone_in_the_drain
  script_keys::scripts_touch_only_the_keys_they_are_given
)
log "over the REST transport: a whole sale, the error mapping, NOSCRIPT, the order path"
run_tests SECKILL_TRANSPORT=rest -- "${REST_TESTS[@]}"

# 4. Three Redis nodes (SECKILL_REDIS_NODES=3: the test kit starts two more redis-servers beside
#    each test's own and lists all three in redis_url), so every event's shards, and every
#    buyer's home, spread over three real nodes; the tests look at a shard's keys on the node
#    that holds it. tests/tests/sharded.rs (first run) drives one event over three nodes
#    natively (sell-out, skew, races, a node restart, the tail cut at each step), and
#    orders/multi_node.rs a dead node. Here the sale and order suites' behaviours over three
#    nodes: the sell-outs (32 shards, and buyers all homed on two shards), tokens and repeat
#    clicks, windows and sold out, limits, the lottery, poll; the drain with its leases, dead
#    letters, pay racing release, reconcile. Left out: what is about one server (MONITOR and
#    the AOF of redis_budget, a Redis restarted or unreachable), the tests that start their own
#    nodes, and those that start a second app on the first one's data (each app would list
#    nodes of its own).
NODE_TESTS=(
  sale::ten_thousand_buyers_thirty_two_shards
  sale::skewed_users_still_sell_out_exactly
  sale::buys_start_at_the_home_shard_tests_compute
  sale::repeat_clicks_buy_at_most_once
  sale::a_replayed_purchase_token_is_409_and_changes_nothing
  sale::once_sold_out_admission_is_410_sold_out
  sale::the_user_rate_limit_refuses_a_burst_and_refills
  sale::a_lottery_admits_exactly_the_drawn_winners
  sale::poll_says_none_before_a_buy_queued_after_it_and_sold_out_to_the_rest
  sale::a_denied_user_is_403_denied
  sale::a_script_failing_on_the_data_is_500_internal_without_retry_advice_or_detail
  orders::the_drain_lands_every_order_once_and_poll_shows_it
  orders::two_drainers_at_once_one_works_per_event
  orders::a_malformed_entry_goes_to_the_dead_letters
  orders::payment_racing_timeout_release_never_both
  orders::a_dead_lettered_order_is_drift_for_an_operator
  orders::one_broken_event_fails_alone_in_the_drain
)
log "over three Redis nodes: the sale and the order path with every event's shards spread"
run_tests SECKILL_REDIS_NODES=3 -- "${NODE_TESTS[@]}"

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

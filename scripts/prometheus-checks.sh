#!/usr/bin/env bash
# The alert rules (infra/prometheus/seckill.rules.yml): `promtool check rules` (syntax, PromQL,
# templates) and `promtool test rules` (seckill.rules.test.yml: each alert fires and stays
# quiet where it should). Without promtool (Debian's prometheus package; scripts/setup.sh
# installs it) the checks are skipped, saying so, or under CI=true fail the run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
RULES=$ROOT/infra/prometheus
if ! command -v promtool >/dev/null 2>&1; then
  skip_or_fail "promtool not found: the alert rules cannot be checked"
  exit 0
fi
passed=0 failed=0
check() { # check <name> <command...>
  local name=$1; shift
  if out=$("$@" 2>&1); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); log "FAILED: $name"; printf '%s\n' "$out" >&2
  fi
}
check "promtool check rules" promtool check rules "$RULES/seckill.rules.yml"
check "promtool test rules" promtool test rules "$RULES/seckill.rules.test.yml"
echo "prometheus: $passed passed, $failed failed"
[ "$failed" = 0 ]

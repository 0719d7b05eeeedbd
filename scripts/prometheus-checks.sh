#!/usr/bin/env bash
# The alert rules (infra/prometheus/seckill.rules.yml): `promtool check rules` (syntax, PromQL,
# templates) and `promtool test rules` (seckill.rules.test.yml: each alert fires and stays
# quiet where it should), and `promtool check config` on the scrape configuration DEPLOY.md shows
# (its "Alerts" section, placeholders filled in). Without promtool (Debian's prometheus package; scripts/setup.sh
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

WORK=$(mktemp -d /tmp/seckill-prometheus.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cp "$RULES/seckill.rules.yml" "$WORK/"
deploy_scrape_config() { # the first yaml block after "## Alerts" in DEPLOY.md, as a config file
  python3 - "$ROOT/infra/terraform/DEPLOY.md" "$WORK/prometheus.yml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
alerts = text[text.index("## Alerts"):]
block = re.search(r"```yaml\n(.*?)```", alerts, re.S).group(1)
open(sys.argv[2], "w").write(re.sub(r"<[^>\n]+>", "placeholder", block))
PY
  promtool check config "$WORK/prometheus.yml"
}
check "promtool check config (DEPLOY.md's scrape configuration)" deploy_scrape_config
echo "prometheus: $passed passed, $failed failed"
[ "$failed" = 0 ]

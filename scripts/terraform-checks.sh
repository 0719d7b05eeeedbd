#!/usr/bin/env bash
# Terraform checks, offline: `terraform fmt -check` over infra/terraform, then `terraform test` in
# every module that has tests. Skips cleanly (exit 0, saying so) where Terraform is missing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if ! command -v terraform >/dev/null 2>&1; then
  log "terraform not found: the Terraform checks are skipped"
  exit 0
fi
export TF_CLI_CONFIG_FILE="$ROOT/infra/terraform/cli.tfrc" TF_IN_AUTOMATION=1
passed=0 failed=0
check() { # check <name> <command...>
  local name=$1; shift
  if "$@" >/tmp/seckill-terraform.log 2>&1; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); log "FAILED: $name"; cat /tmp/seckill-terraform.log >&2
  fi
}
check "terraform fmt -check" terraform fmt -check -recursive "$ROOT/infra/terraform"
for tests in "$ROOT"/infra/terraform/modules/*/tests; do
  dir=$(dirname "$tests")
  check "terraform test $(basename "$dir")" \
    bash -c "terraform -chdir='$dir' init -backend=false -input=false && terraform -chdir='$dir' test"
done
echo "terraform: $passed passed, $failed failed"
[ "$failed" = 0 ]

#!/usr/bin/env bash
# Terraform checks, offline:
#   - `terraform fmt -check` over infra/terraform;
#   - `terraform test` in every module that has tests;
#   - the AWS root through the local provider mirror (infra/terraform/cli.tfrc): init, validate,
#     plan with fake credentials and infra/terraform/aws/tests/plan.tfvars, terraform test (mock provider);
#   - tests/terraform/check_roots.py: every root (aws, serverless, spinkube) parsed and checked
#     against spin.toml / spin.http.toml (variables supplied, secrets sensitive, hosts allowed, the
#     SpinKube root's critical routes routed to their own SpinApp: it runs terraform on the
#     provider-free modules/request-classes), and every root and module for references to what it
#     does not declare;
#   - tests/terraform/check_redis_acl.py: the AWS root's Redis ACL is the commands the app runs;
#   - tests/terraform/migrate_role_test.sh: files/migrate-locked.sh on a real PostgreSQL.
# What this machine cannot run (no terraform, no provider mirror, no python-hcl2, no PostgreSQL)
# is skipped, saying so, or under CI=true fails the run (lib.sh's skip_or_fail).
# Working directories go to a temp dir (TF_DATA_DIR): nothing is left in the tree.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TF=$ROOT/infra/terraform
MIRROR=${SECKILL_TF_MIRROR:-/opt/tf-plugins}/registry.terraform.io/hashicorp/aws
WORK=$(mktemp -d /tmp/seckill-terraform.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
passed=0 failed=0
check() { # check <name> <command...>
  local name=$1; shift
  if "$@" >"$WORK/log" 2>&1; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); log "FAILED: $name"; cat "$WORK/log" >&2
  fi
}
tf() { # tf <dir> <terraform args...>: with its own data dir under $WORK
  local dir=$1; shift
  TF_DATA_DIR="$WORK/data-$(basename "$dir")" terraform -chdir="$dir" "$@"
}

if ! command -v terraform >/dev/null 2>&1; then
  skip_or_fail "terraform not found: the Terraform steps cannot run"
else
  export TF_CLI_CONFIG_FILE="$TF/cli.tfrc" TF_IN_AUTOMATION=1
  check "terraform fmt -check" terraform fmt -check -recursive "$TF"
  module_test() { tf "$1" init -backend=false -input=false && tf "$1" test; }
  for tests in "$TF"/modules/*/tests; do
    dir=$(dirname "$tests")
    check "terraform test $(basename "$dir")" module_test "$dir"
  done

  aws=$TF/aws
  if [ ! -d "$MIRROR" ]; then
    skip_or_fail "no local mirror of hashicorp/aws ($MIRROR): init/validate/plan/test of the AWS root cannot run"
  else
    check "terraform init aws" tf "$aws" init -backend=false -input=false -lockfile=readonly
    check "terraform validate aws" tf "$aws" validate
    # Fake credentials: with offline_checks = true the provider calls nothing until apply.
    plan() {
      AWS_ACCESS_KEY_ID=fake AWS_SECRET_ACCESS_KEY=fake AWS_EC2_METADATA_DISABLED=true \
        tf "$aws" plan -refresh=false -lock=false -input=false -no-color -var-file="$aws/tests/plan.tfvars" >"$WORK/plan.txt" 2>&1 \
        || { cat "$WORK/plan.txt"; return 1; }
      grep -q '^Plan: ' "$WORK/plan.txt"
    }
    check "terraform plan aws" plan
    [ -f "$WORK/plan.txt" ] && grep '^Plan: ' "$WORK/plan.txt" | sed 's/^/terraform plan aws: /' || true
    check "terraform test aws" tf "$aws" test
  fi
fi

if python3 -c 'import hcl2' >/dev/null 2>&1; then
  for checker in check_roots check_redis_acl; do
    check "tests/terraform/$checker.py" python3 "$ROOT/tests/terraform/$checker.py"
    grep -E "^$checker: " "$WORK/log" || true
  done
else
  skip_or_fail "python-hcl2 is not installed (scripts/setup.sh installs it): tests/terraform/check_roots.py and check_redis_acl.py cannot run"
fi

if [ -x "$(pg_bin)/initdb" ] && command -v psql >/dev/null 2>&1; then
  check "tests/terraform/migrate_role_test.sh" bash "$ROOT/tests/terraform/migrate_role_test.sh"
  grep -E '^migrate_role: ' "$WORK/log" || true
else
  skip_or_fail "PostgreSQL's initdb or psql not found: tests/terraform/migrate_role_test.sh cannot run"
fi

# The count only when something ran: a bare "0 passed" would read as a suite that ran nothing.
[ $((passed + failed)) = 0 ] || echo "terraform: $passed passed, $failed failed"
[ "$failed" = 0 ]

#!/usr/bin/env bash
# Installs what seckill needs on a fresh Debian machine, idempotently and quietly when done:
# redis-server, PostgreSQL, a wasm32-wasip2 Rust toolchain, cargo-nextest, and for the browser
# tests chromium and playwright-core.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

have_pg() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; }

# 1. Servers. The Debian packages start system services we do not use: our scripts start their
#    own servers on loopback in .data/ (and the tests in temp dirs).
command -v redis-server >/dev/null 2>&1 || apt_install redis-server redis-tools
have_pg || apt_install postgresql
command -v psql >/dev/null 2>&1 || apt_install postgresql-client

# 2. Rust. rustup's stable toolchain builds the host; the guests need wasm32-wasip2.
command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust with rustup first"
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  log "adding the wasm32-wasip2 target"
  if ! timeout 300 rustup target add wasm32-wasip2 >/dev/null 2>&1; then
    log "rustup cannot download the target here: building it from Debian packages instead"
    bash "$ROOT/scripts/wasm-toolchain.sh" --no-verify
  fi
fi

# 3. Test runner (falls back to `cargo test` if this cannot be installed).
if ! command -v cargo-nextest >/dev/null 2>&1; then
  log "installing cargo-nextest"
  cargo install --locked cargo-nextest >/dev/null 2>&1 || log "cargo-nextest unavailable; tests will use cargo test"
fi

# pip_install REQUIREMENT...: into the system's Python, quietly. Debian's Python is "externally
# managed": where pip refuses it, the install is retried with --break-system-packages.
pip_install() {
  command -v pip3 >/dev/null 2>&1 || python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  local pip=(python3 -m pip install --quiet --disable-pip-version-check)
  log "pip install $*"
  "${pip[@]}" --root-user-action=ignore "$@" 2>/dev/null || "${pip[@]}" --break-system-packages "$@"
}

# 4. The OpenAPI checker (scripts/check-openapi.py): openapi-core, a maintained validator, and
#    PyYAML (the dashboard's check, scripts/check-dashboard.py, reads the alert rules with it);
#    for tests/terraform/check_roots.py, python-hcl2 (without it scripts/terraform-checks.sh
#    skips that check, which fails the run under CI=true).
python3 -c 'import openapi_core, yaml' >/dev/null 2>&1 || pip_install 'openapi-core==0.23.1' 'PyYAML>=6'
# The shop's endpoint in the tests and the demo (tools/testkit/shop/receiver.py) verifies order
# events with the Standard Webhooks reference library.
python3 -c 'import standardwebhooks' >/dev/null 2>&1 || pip_install 'standardwebhooks==1.3.0'
python3 -c 'import hcl2' >/dev/null 2>&1 || pip_install 'python-hcl2==8.1.4' ||
  log "python-hcl2 unavailable: tests/terraform/check_roots.py cannot run"

# For scripts/prometheus-checks.sh: promtool, from Debian's prometheus package (whose service
# we do not use either).
command -v promtool >/dev/null 2>&1 || apt_install prometheus

# 5. The browser tests (scripts/browser-tests.sh): Debian's chromium, driven by playwright-core
#    from npm. Never a browser download of Playwright's own.
command -v chromium >/dev/null 2>&1 || apt_install chromium
command -v npm >/dev/null 2>&1 || apt_install nodejs npm
installed="$ROOT/tests/browser/node_modules/.package-lock.json"
if [ ! -f "$installed" ] || [ "$ROOT/tests/browser/package-lock.json" -nt "$installed" ]; then
  log "npm ci in tests/browser (playwright-core)"
  (cd "$ROOT/tests/browser" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent)
fi

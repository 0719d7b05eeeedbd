# Sourced by the other scripts: shared settings and helpers.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
log() { printf '[seckill] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# cargo that can build wasm32-wasip2: rustup's own toolchain when it has the target, else the
# `wasm` toolchain that scripts/wasm-toolchain.sh built from Debian packages.
wasm_cargo() {
  if rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    cargo "$@"
  elif command -v cargo-wasm >/dev/null 2>&1; then
    cargo-wasm "$@"
  else
    die "no wasm32-wasip2 toolchain: run scripts/setup.sh"
  fi
}

# Builds every guest component: the functions (the deploy build), then, in a build of their
# own so their features stay out of the functions, the tests' components.
build_wasm() {
  (cd "$ROOT" && wasm_cargo build --quiet --target wasm32-wasip2 --release)
  (cd "$ROOT" && wasm_cargo build --quiet --target wasm32-wasip2 --release \
    -p hello -p conformance -p cron-probe -p faulty-jobs)
}

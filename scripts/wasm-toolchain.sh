#!/usr/bin/env bash
# The route scripts/setup.sh takes when `rustup target add wasm32-wasip2` cannot download: a
# Rust toolchain that builds WebAssembly components (wasm32-wasip2) from Debian packages and the
# crate registry only, on Debian 12 (bookworm) x86_64 (setup.sh takes the rustup route itself).
#
#   rustc-web, cargo-web, rust-web-src (bookworm-security); lld-<N> (N = rustc-web's LLVM) for
#   wasm-ld; wasi-libc from *trixie* (arch: all .deb, only unpacked into $PREFIX, dpkg is not
#   touched): bookworm's wasi-libc (2022, p1 only) links, but std::fs fails with ENOTCAPABLE on
#   wasm32-wasip2. std/core/alloc for the target are compiled once from rust-web-src with
#   `cargo -Zbuild-std` (RUSTC_BOOTSTRAP=1, only here) into a private sysroot laid out like a
#   rustup toolchain; wasm-component-ld is copied from the local rustup toolchain if it has one,
#   else `cargo install`ed from the crate registry. Project builds then need no -Z flags.
#
# The result: $PREFIX/toolchain (bin/cargo, bin/rustc, lib/rustlib/...), rustup toolchain
# "$NAME" linked to it when rustup exists, and $PREFIX/bin/cargo-wasm, a wrapper that works with
# or without rustup (scripts/lib.sh uses it):
#   cargo-wasm build --target wasm32-wasip2 --release -p <crate>
#
# Usage: wasm-toolchain.sh [--no-verify]   (verify builds and, with wasmtime, runs a probe)
# Environment (all optional):
#   WASM_TOOLCHAIN_PREFIX   install prefix              (default /opt/wasm-toolchain)
#   WASM_TOOLCHAIN_NAME     rustup toolchain name       (default wasm)
#   WASM_TARGETS            space separated targets     (default "wasm32-wasip2")
#   WASM_RUSTUP_TOOLCHAIN   rustup toolchain whose wasm-component-ld is copied (default stable)
#   WASM_TOOLCHAIN_BINDIR   where to symlink cargo-wasm (default /usr/local/bin when root)
#   WASM_COMPONENT_LD_FROM  auto|rustup|cargo           (default auto: rustup's copy if present)
#   WASI_LIBC_SOURCE        trixie|bookworm             (default trixie, see above)
#   WASM_COMPONENT_LD_VERSION                           (pin for the crate-registry route)
set -euo pipefail
source "$(dirname "$0")/lib.sh"   # log, die, apt_install, apt_update_once, SUDO

# ----------------------------------------------------------------- settings --
PREFIX=${WASM_TOOLCHAIN_PREFIX:-/opt/wasm-toolchain}
NAME=${WASM_TOOLCHAIN_NAME:-wasm}
TARGETS=${WASM_TARGETS:-wasm32-wasip2}
RUSTUP_BASE=${WASM_RUSTUP_TOOLCHAIN:-stable}
MIN_RUST=1.94.0
WCLD_VERSION=${WASM_COMPONENT_LD_VERSION:-0.5.22}   # = the one rustc 1.96 bundles (WASI 0.2.6 adapter)
WCLD_FROM=${WASM_COMPONENT_LD_FROM:-auto}
WASI_LIBC_SOURCE=${WASI_LIBC_SOURCE:-trixie}
# The Debian archive this machine already uses (first "deb" line of its apt sources).
apt_mirror() {
  local m
  m=$(grep -hsE "^(deb|URIs:)" /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
      | grep -v security | grep -oE "https?://[^ ]+" | head -n 1)
  printf "%s" "${m%/}"
}
DEBIAN_MIRROR=${WASM_DEBIAN_MIRROR:-$(apt_mirror)}
WASI_LIBC_DEB=${WASI_LIBC_DEB:-pool/main/w/wasi-libc/wasi-libc_0.0~git20241209.574b88d-2_all.deb}
WASI_LIBC_SHA256=${WASI_LIBC_SHA256:-b7716260051d289248b7667f81fa2792c125d888ff51da3fa09c6272cc0bd11d}
STD_RECIPE_REV=1        # bump to force a std rebuild when the recipe below changes
if [ "$(id -u)" = 0 ]; then BINDIR=${WASM_TOOLCHAIN_BINDIR-/usr/local/bin}; else BINDIR=${WASM_TOOLCHAIN_BINDIR-}; fi

VERIFY=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-verify) VERIFY=0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

# version_ge A B  ->  true if A >= B (A may carry a -nightly suffix)
version_ge() { [ "$(printf '%s\n%s\n' "${1%%-*}" "$2" | sort -V | head -n1)" = "$2" ]; }
RUSTUP_HOME_DIR=${RUSTUP_HOME:-$HOME/.rustup}

mkdir -p "$PREFIX" "$PREFIX/bin" "$PREFIX/tools/bin"
PREFIX=$(cd "$PREFIX" && pwd -P)
TC="$PREFIX/toolchain"

# Point $PREFIX/toolchain at $1 (always a symlink, so switching routes is cheap).
point_toolchain() {
  if [ -e "$TC" ] && [ ! -L "$TC" ]; then die "$TC exists and is not a symlink; remove it"; fi
  if [ "$(readlink "$TC" 2>/dev/null || true)" != "$1" ]; then ln -sfn "$1" "$TC"; fi
}

# ------------------------------------------------------------ route: debian --
pkg_version() { { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null || true; } | awk '$3=="installed"{print $4}'; }

debian_packages() {
  command -v apt-get >/dev/null || die "apt-get not found: the debian route needs Debian/Ubuntu"
  local need=0 p rv sv rel
  for p in rustc-web cargo-web rust-web-src; do [ -n "$(pkg_version $p)" ] || need=1; done
  rv=$(pkg_version rustc-web); sv=$(pkg_version rust-web-src)
  [ "$rv" = "$sv" ] || need=1                       # std source must match rustc exactly
  [ "$(pkg_version cargo-web)" = "$rv" ] || need=1
  if [ $need = 0 ]; then
    rel=$(/usr/bin/rustc -vV | sed -n 's/^release: //p')
    version_ge "$rel" "$MIN_RUST" || need=1
  fi
  [ $need = 1 ] && apt_install rustc-web cargo-web rust-web-src
  rel=$(/usr/bin/rustc -vV | sed -n 's/^release: //p')
  version_ge "$rel" "$MIN_RUST" || die "Debian rustc-web is $rel, need >= $MIN_RUST (is bookworm-security enabled?)"
  [ "$(pkg_version rustc-web)" = "$(pkg_version rust-web-src)" ] || die "rustc-web and rust-web-src versions differ"
  [ -f /usr/lib/rustlib/src/rust/library/Cargo.lock ] || die "rust-web-src did not provide /usr/lib/rustlib/src/rust/library"

  # wasm-ld: lld of the same LLVM major as rustc-web (rustc-web links libLLVM-N)
  LLVM_MAJOR=$(/usr/bin/rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
  WASM_LD=""
  local cand
  for cand in "/usr/lib/llvm-$LLVM_MAJOR/bin/wasm-ld" "/usr/bin/wasm-ld-$LLVM_MAJOR"; do
    [ -x "$cand" ] && { WASM_LD=$cand; break; }
  done
  if [ -z "$WASM_LD" ]; then
    apt_update_once
    if apt-cache show "lld-$LLVM_MAJOR" >/dev/null 2>&1; then apt_install "lld-$LLVM_MAJOR"
    else log "lld-$LLVM_MAJOR not available, falling back to package lld"; apt_install lld; fi
    for cand in "/usr/lib/llvm-$LLVM_MAJOR/bin/wasm-ld" "/usr/bin/wasm-ld-$LLVM_MAJOR" /usr/bin/wasm-ld; do
      [ -x "$cand" ] && { WASM_LD=$cand; break; }
    done
  fi
  [ -n "$WASM_LD" ] || die "no wasm-ld found after installing lld"
  WASM_LD=$(readlink -f "$WASM_LD")    # .../llvm-N/bin/lld (multi-call binary)
}

# wasi-libc: sets WASI_LIBC_ROOT (dir holding wasm32-wasip1/ + wasm32-wasip2/,
# or wasm32-wasi/ for the bookworm fallback) and WASI_LIBC_ID.
wasi_libc() {
  local dest="$PREFIX/wasi-libc/trixie" tmp deb="" A
  if [ "$WASI_LIBC_SOURCE" = trixie ]; then
    if [ -f "$dest/.complete" ] && [ -f "$dest/wasm32-wasip1/libc.a" ] && [ -f "$dest/wasm32-wasip2/libc.a" ]; then
      WASI_LIBC_ROOT=$dest; WASI_LIBC_ID=$(cat "$dest/.complete"); return 0
    fi
    tmp=$(mktemp -d -t wasi-libc.XXXXXX); chmod 755 "$tmp"
    log "fetching $DEBIAN_MIRROR/$WASI_LIBC_DEB"
    if /usr/lib/apt/apt-helper download-file "$DEBIAN_MIRROR/$WASI_LIBC_DEB" "$tmp/wasi-libc.deb" "SHA256:$WASI_LIBC_SHA256" >/dev/null 2>&1; then
      deb="$tmp/wasi-libc.deb"
    else
      # the pinned file left the pool: ask apt (signature-checked) for trixie's current one
      log "pinned wasi-libc .deb not available; asking apt for trixie's wasi-libc"
      mkdir -p "$tmp/apt/lists/partial" "$tmp/apt/cache/archives/partial"
      echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR trixie main" > "$tmp/apt/sources.list"
      A=(-o "Dir::Etc::SourceList=$tmp/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
         -o "Dir::State::Lists=$tmp/apt/lists" -o "Dir::Cache=$tmp/apt/cache" -o Acquire::Languages=none)
      if apt-get "${A[@]}" update -qq >/dev/null 2>&1 && (cd "$tmp" && apt-get "${A[@]}" download -qq wasi-libc >/dev/null 2>&1); then
        deb=$(ls "$tmp"/wasi-libc_*.deb 2>/dev/null | head -n1 || true)
      fi
    fi
    if [ -n "$deb" ] && dpkg-deb -x "$deb" "$tmp/x" && [ -f "$tmp/x/usr/lib/wasm32-wasip2/libc.a" ] \
       && [ -f "$tmp/x/usr/lib/wasm32-wasip1/libc.a" ]; then
      rm -rf "$dest"; mkdir -p "$dest"
      cp -a "$tmp/x/usr/lib/"wasm32-wasi* "$dest/"     # wasm32-wasip1 is a symlink to wasm32-wasi
      echo "trixie-$(dpkg-deb -f "$deb" Version)" > "$dest/.complete"; rm -rf "$tmp"
      WASI_LIBC_ROOT=$dest; WASI_LIBC_ID=$(cat "$dest/.complete"); return 0
    fi
    rm -rf "$tmp"
    log "WARNING: could not get trixie's wasi-libc; falling back to bookworm's (2022, wasm32-wasi only)."
    log "WARNING: with it, std::fs fails with ENOTCAPABLE on wasm32-wasip2 and std::net does not link."
  fi
  [ -n "$(pkg_version wasi-libc)" ] || apt_install wasi-libc
  [ -f /usr/lib/wasm32-wasi/libc.a ] || die "wasi-libc did not provide /usr/lib/wasm32-wasi/libc.a"
  WASI_LIBC_ROOT=/usr/lib; WASI_LIBC_ID="bookworm-$(pkg_version wasi-libc)"
}

# libc files for rustc's self-contained linking of target $2 in sysroot $1
install_libc() {
  local dir="$1/lib/rustlib/$2/lib/self-contained" src="$WASI_LIBC_ROOT/$2" f tmp
  [ -f "$src/libc.a" ] || src="$WASI_LIBC_ROOT/wasm32-wasi"
  mkdir -p "$dir"
  for f in crt1-command.o crt1-reactor.o; do
    cmp -s "$src/$f" "$dir/$f" || cp -f "$src/$f" "$dir/$f"
  done
  # Rust 1.96's std references pthread_join/pthread_detach (std::thread, and so
  # libtest).  wasi-libc releases before 2025 only define them in
  # libwasi-emulated-pthread.a, so append that stub object to libc.a (GNU ar
  # drops the archive index; wasm-ld >= 18 does not need one).
  tmp=$(mktemp -d -t wasi-libc-merge.XXXXXX)
  cp "$src/libc.a" "$tmp/libc.a"
  if ! ar t "$tmp/libc.a" | grep -q '^pthread_join' && [ -f "$src/libwasi-emulated-pthread.a" ]; then
    ( cd "$tmp" && ar x "$src/libwasi-emulated-pthread.a" stub-pthreads-emulated.o \
        && ar qD libc.a stub-pthreads-emulated.o ) || die "could not add pthread stubs to libc.a"
  fi
  cmp -s "$tmp/libc.a" "$dir/libc.a" || cp -f "$tmp/libc.a" "$dir/libc.a"
  rm -rf "$tmp"
  echo "$WASI_LIBC_ID ($src)" > "$dir/.wasi-libc"
}

# cargo install $1@$2 into $PREFIX/tools unless that version is already there
tool_install() {
  local crate=$1 ver=$2 bin=$3
  if [ -x "$PREFIX/tools/bin/$bin" ] && "$PREFIX/tools/bin/$bin" --version 2>/dev/null | grep -q " $ver\b"; then
    return 0
  fi
  log "cargo install --locked $crate@$ver (this compiles from source)"
  local t0=$SECONDS
  (  # host build with the toolchain's own cargo/rustc; never touches project dirs
    cd /tmp && env -u RUSTUP_TOOLCHAIN -u CARGO_BUILD_TARGET -u CARGO_TARGET_DIR PATH="$TC/bin:$PATH" \
      "$TC/bin/cargo" install --locked --root "$PREFIX/tools" --force "$crate@$ver"
  )
  log "installed $crate $ver in $((SECONDS - t0))s"
}

write_exec() {  # write_exec FILE  (content from stdin), only touch it when changed
  local f=$1 tmp; tmp=$(mktemp "$f.XXXXXX")
  cat > "$tmp"; chmod 0755 "$tmp"
  if [ -f "$f" ] && cmp -s "$tmp" "$f"; then rm -f "$tmp"; else mv -f "$tmp" "$f"; fi
}

# wasm-component-ld for the debian sysroot ($1 = host bin dir of the sysroot)
component_ld() {
  local bindir=$1 bundled="" have sr=""
  if [ "$WCLD_FROM" != cargo ] && command -v rustup >/dev/null 2>&1; then
    sr=$(rustup run "$RUSTUP_BASE" rustc --print sysroot 2>/dev/null || true)
    bundled="$sr/lib/rustlib/$HOST/bin/wasm-component-ld"
    [ -n "$sr" ] && [ -x "$bundled" ] || bundled=""
  fi
  if [ "$WCLD_FROM" = rustup ] && [ -z "$bundled" ]; then die "no rustup-bundled wasm-component-ld found"; fi
  if [ -n "$bundled" ]; then
    # a copy, so that later rustup changes do not alter this toolchain behind our back
    have=$("$PREFIX/tools/bin/wasm-component-ld-rustup" --version 2>/dev/null || true)
    if [ "$have" != "$("$bundled" --version)" ]; then cp -f "$bundled" "$PREFIX/tools/bin/wasm-component-ld-rustup"; fi
    ln -sfn "$PREFIX/tools/bin/wasm-component-ld-rustup" "$bindir/wasm-component-ld"
    log "wasm-component-ld: $("$bundled" --version) (copy of rustup's bundled $bundled)"
  else
    tool_install wasm-component-ld "$WCLD_VERSION" wasm-component-ld
    ln -sfn "$PREFIX/tools/bin/wasm-component-ld" "$bindir/wasm-component-ld"
    log "wasm-component-ld: $("$PREFIX/tools/bin/wasm-component-ld" --version) (crate registry)"
  fi
}

setup_debian() {
  debian_packages
  local D="$PREFIX/debian"
  HOST=$(/usr/bin/rustc -vV | sed -n 's/^host: //p')
  mkdir -p "$D/bin" "$D/lib/rustlib/$HOST/bin"
  # The private sysroot reuses Debian's host std and source via symlinks.
  ln -sfn "/usr/lib/rustlib/$HOST/lib" "$D/lib/rustlib/$HOST/lib"
  ln -sfn /usr/lib/rustlib/src "$D/lib/rustlib/src"
  [ -d /usr/lib/rustlib/etc ] && ln -sfn /usr/lib/rustlib/etc "$D/lib/rustlib/etc"
  # rustc puts <sysroot>/lib/rustlib/<host>/bin first on the linker's PATH:
  #   wasm32-wasip2 links with `wasm-component-ld`, which runs `wasm-ld`;
  #   wasm32-wasip1 links with `rust-lld -flavor wasm`.
  ln -sfn "$WASM_LD" "$D/lib/rustlib/$HOST/bin/wasm-ld"
  ln -sfn "$WASM_LD" "$D/lib/rustlib/$HOST/bin/rust-lld"
  write_exec "$D/bin/rustc" <<EOF
#!/bin/sh
# generated by scripts/wasm-toolchain.sh: Debian rustc with the private wasm sysroot
exec /usr/bin/rustc --sysroot "$D" "\$@"
EOF
  write_exec "$D/bin/rustdoc" <<EOF
#!/bin/sh
exec /usr/bin/rustdoc --sysroot "$D" "\$@"
EOF
  write_exec "$D/bin/cargo" <<EOF
#!/bin/sh
# generated by scripts/wasm-toolchain.sh: Debian cargo driving the wrapped rustc
RUSTC="$D/bin/rustc" RUSTDOC="$D/bin/rustdoc" exec /usr/bin/cargo "\$@"
EOF
  point_toolchain "$D"
  echo debian > "$PREFIX/route"

  component_ld "$D/lib/rustlib/$HOST/bin"
  wasi_libc
  local t
  for t in $TARGETS; do
    build_std "$D" "$t"
    install_libc "$D" "$t"
  done
  log "route debian: $TC -> $D (rustc $(/usr/bin/rustc -vV | sed -n 's/^release: //p'), wasm-ld $WASM_LD, wasi-libc $WASI_LIBC_ID)"
}

# Compile std & co. for target $2 from rust-web-src and install it into sysroot $1.
build_std() {
  local D=$1 t=$2 dest="$1/lib/rustlib/$2" stamp want work crates
  case "$t" in
    wasm32-wasip1|wasm32-wasip2) ;;
    *) die "target $t is not supported by the debian route (only wasm32-wasip1/wasm32-wasip2)" ;;
  esac
  want="recipe=$STD_RECIPE_REV rustc=$(/usr/bin/rustc -vV | md5sum | cut -c1-16) src=$(pkg_version rust-web-src)"
  stamp="$dest/lib/.setup-wasm-toolchain-stamp"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    log "std for $t is up to date"; return 0
  fi
  log "building std for $t from $(readlink -f /usr/lib/rustlib/src/rust) (one-off, a few minutes)"
  local t0=$SECONDS
  work=$(mktemp -d -t wasm-std-build.XXXXXX)
  mkdir -p "$work/src"
  cat > "$work/Cargo.toml" <<'EOF'
[package]
name = "wasm-sysroot-builder"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "src/lib.rs"

[workspace]

# Mirrors the upstream "dist" profile used for rustup's rust-std components.
[profile.release]
opt-level = 3
debug = 1
codegen-units = 1
lto = false
panic = "abort"
incremental = false
debug-assertions = false
overflow-checks = false
EOF
  echo '#![no_std]' > "$work/src/lib.rs"
  crates="std,panic_abort,test"
  # /usr/bin/rustc (sysroot /usr) is used on purpose: its sysroot has no wasm
  # libraries, so nothing stale can be picked up.  -Cembed-bitcode=yes keeps
  # LLVM bitcode in the rlibs so that projects can use lto = true, like with
  # rustup's rust-std (cargo would otherwise pass -Cembed-bitcode=no).
  # std's own crate-registry dependencies (libc, wasi, wit-bindgen, ...) are
  # downloaded as pinned by library/Cargo.lock.
  ( cd "$work" && env -u RUSTUP_TOOLCHAIN -u CARGO_BUILD_TARGET -u RUSTFLAGS -u CARGO_TARGET_DIR \
      RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc CARGO_TARGET_DIR="$work/target" \
      CARGO_ENCODED_RUSTFLAGS="-Cembed-bitcode=yes" \
      /usr/bin/cargo build --release --target "$t" -Zbuild-std="$crates" ) \
    || die "building std for $t failed (work dir kept: $work)"
  local out="$work/target/$t/release/deps" stage="$dest.new.$$"
  rm -rf "$stage"; mkdir -p "$stage/lib"
  find "$out" -maxdepth 1 \( -name 'lib*.rlib' -o -name 'lib*.rmeta' \) ! -name 'libwasm_sysroot_builder-*' \
    -exec cp {} "$stage/lib/" \;
  ls "$stage/lib"/libstd-*.rlib >/dev/null 2>&1 || die "std rlib missing in $out"
  [ -d "$dest/lib/self-contained" ] && cp -a "$dest/lib/self-contained" "$stage/lib/"
  echo "$want" > "$stage/lib/.setup-wasm-toolchain-stamp"
  rm -rf "$dest.old"; [ -d "$dest" ] && mv "$dest" "$dest.old"
  mv "$stage" "$dest"; rm -rf "$dest.old" "$work"
  log "std for $t installed into $dest in $((SECONDS - t0))s"
}

# ------------------------------------------------------------- common bits --
link_rustup_toolchain() {
  command -v rustup >/dev/null 2>&1 || { log "rustup not found: use $PREFIX/bin/cargo-wasm"; return 0; }
  local link="$RUSTUP_HOME_DIR/toolchains/$NAME" cur
  if [ -L "$link" ]; then
    cur=$(readlink "$link")
    if [ "$cur" = "$TC" ] || [ "$(readlink -f "$link")" = "$(readlink -f "$TC")" ]; then
      # rustup may have stored the resolved path; refresh it if the route changed
      [ "$cur" = "$TC" ] || { rm -f "$link"; rustup toolchain link "$NAME" "$TC" >/dev/null; }
      return 0
    fi
    rm -f "$link"            # a stale link of ours (or an old route); it is only a symlink
  elif [ -e "$link" ]; then
    die "rustup toolchain '$NAME' exists and is not a linked toolchain; pick another WASM_TOOLCHAIN_NAME"
  fi
  rustup toolchain link "$NAME" "$TC" >/dev/null
  log "rustup toolchain '$NAME' -> $TC"
}

write_wrappers() {
  write_exec "$PREFIX/bin/cargo-wasm" <<EOF
#!/bin/sh
# cargo-wasm (generated by scripts/wasm-toolchain.sh): cargo from the wasm toolchain.
#   cargo-wasm build --target wasm32-wasip2 --release -p <crate>
#   cargo wasm build --target wasm32-wasip2 --release -p <crate>   (as a cargo subcommand)
[ "\$1" = wasm ] && shift
unset RUSTUP_TOOLCHAIN RUSTC RUSTDOC CARGO
PATH="$TC/bin:$PREFIX/tools/bin:\$PATH"; export PATH
exec "$TC/bin/cargo" "\$@"
EOF
  cat > "$PREFIX/env" <<EOF
# source this file: puts cargo-wasm, wasm-tools, wasmtime on PATH
export PATH="$PREFIX/bin:$PREFIX/tools/bin:\$PATH"
EOF
  if [ -n "$BINDIR" ]; then
    mkdir -p "$BINDIR"
    local f src
    for f in cargo-wasm wasm-tools wasmtime; do
      src="$PREFIX/bin/$f"; [ -e "$src" ] || src="$PREFIX/tools/bin/$f"
      [ -e "$src" ] || continue
      if [ -L "$BINDIR/$f" ] || [ ! -e "$BINDIR/$f" ]; then ln -sfn "$src" "$BINDIR/$f"
      else log "not overwriting existing $BINDIR/$f"; fi
    done
  fi
}

verify() {
  local t work kind magic wasm run data
  work=$(mktemp -d -t wasm-toolchain-verify.XXXXXX)
  mkdir -p "$work/src" "$work/data"
  cat > "$work/Cargo.toml" <<'EOF'
[package]
name = "wasm-toolchain-verify"
version = "0.0.0"
edition = "2021"
publish = false
[workspace]
[profile.release]
lto = true
strip = true
EOF
  cat > "$work/src/main.rs" <<'EOF'
use std::io::{Read, Write};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut fs = String::from("skipped");
    if let Some(dir) = args.get(1) {
        let p = format!("{dir}/probe.txt");
        std::fs::File::create(&p).and_then(|mut f| f.write_all(b"ok")).expect("fs write");
        let mut s = String::new();
        std::fs::File::open(&p).and_then(|mut f| f.read_to_string(&mut s)).expect("fs read");
        fs = s;
    }
    // links std::thread (pthread_*); wasi has no threads, so this normally reports an error
    let th = std::thread::Builder::new().spawn(|| 1).map(|h| h.join().is_ok()).is_ok();
    println!("args={} env={:?} clock={} fs={} (thread spawn supported: {th})", args.len(), std::env::var("PROBE").ok(), secs > 1_600_000_000, fs);
}
EOF
  for t in $TARGETS; do
    ( cd "$work" && "$PREFIX/bin/cargo-wasm" build --quiet --offline --release --target "$t" ) \
      || die "verification build for $t failed (dir: $work)"
    wasm="$work/target/$t/release/wasm-toolchain-verify.wasm"
    magic=$(od -An -tx1 -N8 "$wasm" | tr -d ' \n')
    case "$magic" in
      0061736d0d000100) kind=component ;;
      0061736d01000000) kind="core module" ;;
      *) die "unexpected wasm header $magic for $t" ;;
    esac
    if [ "$t" = wasm32-wasip2 ] && [ "$kind" != component ]; then die "wasm32-wasip2 output is not a component"; fi
    run=""
    local wt="$PREFIX/tools/bin/wasmtime"
    [ -x "$wt" ] || wt=$(command -v wasmtime || true)
    if [ -n "$wt" ]; then
      run=$("$wt" run --dir "$work/data::/data" --env PROBE=1 "$wasm" /data 2>&1) \
        || die "wasmtime run failed for $t: $run"
      case "$run" in *'args=2 env=Some("1") clock=true fs=ok'*) ;; *) die "unexpected output for $t: $run" ;; esac
      run=" -> wasmtime run: $run"
    fi
    log "verify $t: OK ($kind, $(wc -c < "$wasm") bytes)$run"
  done
  rm -rf "$work"
}

# -------------------------------------------------------------------- main --
log "prefix $PREFIX, toolchain name '$NAME', targets: $TARGETS"
setup_debian
link_rustup_toolchain
write_wrappers
[ $VERIFY = 1 ] && verify
log "done (route: $(cat "$PREFIX/route")). Build a component with:"
log "  cargo +$NAME build --target wasm32-wasip2 --release -p <crate>    # rustup"
log "  $PREFIX/bin/cargo-wasm build --target wasm32-wasip2 --release -p <crate>"

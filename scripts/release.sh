#!/usr/bin/env bash
# The self-hosted release artifact: target/dist/seckill-<version>-<target>.tar.gz, to unpack
# into one directory (flat, as infra/terraform/aws/files/boot.sh.tftpl unpacks the app) and run with
# bin/seckill-host or with `spin up`:
#   bin/seckill-host        the host, release build
#   wasm/*.wasm             every component spin.toml names
#   spin.toml               its sources pointing at wasm/
#   migrations/             the Postgres schema (infra/terraform/files/migrate-locked.sh applies it)
#   api/openapi.yaml        the API
#   seckill-host.service    the systemd unit (infra/terraform/files/)
#   SHA256SUMS              of every file above
# Version: SECKILL_VERSION, else the workspace's. SECKILL_DIST_DIR writes elsewhere than
# target/dist; SECKILL_RELEASE_NO_BUILD=1 packs what is already built (the test does).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

version=${SECKILL_VERSION:-$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)}
target=$(rustc -vV | sed -n 's/^host: //p')
[ -n "$version" ] && [ -n "$target" ] || die "cannot tell the version or the target"
name=seckill-$version-$target
dist=${SECKILL_DIST_DIR:-$ROOT/target/dist}

if [ "${SECKILL_RELEASE_NO_BUILD:-}" != 1 ]; then
  log "building the components and the host"
  build_app
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -d "$stage/bin" "$stage/wasm" "$stage/api"
install -m 0755 target/release/seckill-host "$stage/bin/seckill-host"
sources=$(sed -n 's/^source = "\(.*\.wasm\)"$/\1/p' spin.toml)
[ -n "$sources" ] || die "spin.toml names no .wasm source"
for source in $sources; do
  [ -f "$source" ] || die "$source is missing: build it first (scripts/release.sh without SECKILL_RELEASE_NO_BUILD)"
  install -m 0644 "$source" "$stage/wasm/"
done
sed -E 's#^source = "([^"]*/)?([^"/]+\.wasm)"$#source = "wasm/\2"#' spin.toml >"$stage/spin.toml"
if grep -E '^source = ' "$stage/spin.toml" | grep -vq '^source = "wasm/'; then
  die "spin.toml has a source this script does not rewrite"
fi
install -m 0644 api/openapi.yaml "$stage/api/openapi.yaml"
cp -R migrations "$stage/migrations"
install -m 0644 infra/terraform/files/seckill-host.service "$stage/seckill-host.service"
(cd "$stage" && find . -type f ! -name SHA256SUMS | sed 's#^\./##' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)

mkdir -p "$dist"
tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -czf "$dist/$name.tar.gz" .
log "wrote $dist/$name.tar.gz"
echo "$dist/$name.tar.gz"

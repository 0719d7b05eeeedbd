#!/bin/sh
# Writes Spin's runtime config for `spin up --runtime-config-file`: one static variables provider
# holding a value for EVERY variable of the manifest, so that Spin never asks its environment
# provider.
#
# Why: Spin resolves variables through its providers in order, the runtime config's first and
# the environment provider (SPIN_VARIABLE_*) always appended last
# (spinframework/spin crates/runtime-config/src/variables.rs; crates/expressions/src/lib.rs,
# `resolve_variable`). Each environment lookup runs `tokio::task::block_in_place`
# (crates/variables-env/src/lib.rs), and the outbound-networking factor resolves every
# app-level variable on an instance's first outbound connection
# (crates/factor-outbound-networking/src/lib.rs, `prepare` -> `resolver.prepare()`), so with
# the environment provider alone each request pays one blocking call per variable. A static
# provider (crates/variables-static/src/lib.rs: a map lookup) answers first; a variable missing
# from it would still fall through to the environment provider and then its default, so this
# writes the manifest's defaults too.
#
# Values: SPIN_VARIABLE_<NAME> from the environment (secrets, hosts, overrides) win over the
# manifest's `default`; a variable with neither is left out (Spin then reports it missing at
# start). Every SPIN_VARIABLE_* of the environment is written, declared or not; one the manifest
# does not declare (say SPIN_VARIABLE_DRAIN_BATCH: the settings are the one variable `settings`)
# is reported on stderr, since Spin never reads it.
#
# What it costs: the values, secrets included, are in <out> in the clear. It is written with
# umask 077 (mode 0600, owned by whoever runs this, e.g. the service user) and replaced
# atomically; keep it on a tmpfs (/run) and out of any checkout or image.
#
# Usage: SPIN_VARIABLE_...=... spin-runtime-config.sh <spin.toml> <out>
# POSIX sh and awk (the manifest's [variables] are parsed as `name = { default = "...", ... }`
# one-line inline tables, the only way TOML writes an inline table).
set -eu
manifest=${1:?manifest (spin.toml)}
out=${2:?output file}
[ -f "$manifest" ] || { echo "spin-runtime-config: no manifest $manifest" >&2; exit 1; }

umask 077
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
awk '
  function basic(s,    r, i, c) { # a TOML basic string (no gsub: awks differ on "\\" in replacements)
    r = ""
    for (i = 1; i <= length(s); i++) { c = substr(s, i, 1); r = r (c == "\\" || c == "\"" ? "\\" : "") c }
    return "\"" r "\""
  }
  /^[ \t]*\[/ { in_vars = ($0 ~ /^[ \t]*\[variables\][ \t]*(#.*)?$/); next }
  in_vars && match($0, /^[ \t]*[a-z][a-z0-9_]*[ \t]*=[ \t]*\{/) {
    name = $0; sub(/^[ \t]*/, "", name); sub(/[ \t]*=.*/, "", name)
    declared[name] = 1
    if (match($0, /[{,][ \t]*default[ \t]*=[ \t]*"([^"\\]|\\.)*"/)) {
      d = substr($0, RSTART, RLENGTH); sub(/^[{,][ \t]*default[ \t]*=[ \t]*/, "", d)
      value[name] = d # a TOML basic string, escapes and all
    } else if (match($0, /[{,][ \t]*default[ \t]*=[ \t]*\047[^\047]*\047/)) {
      d = substr($0, RSTART, RLENGTH); sub(/^[{,][ \t]*default[ \t]*=[ \t]*\047/, "", d); sub(/\047$/, "", d)
      value[name] = basic(d)
    }
  }
  END {
    for (k in ENVIRON) {
      if (k !~ /^SPIN_VARIABLE_[A-Z][A-Z0-9_]*$/) continue
      v = ENVIRON[k]
      if (v ~ /[\001-\037\177]/) { printf "spin-runtime-config: %s holds a control character\n", k > "/dev/stderr"; bad = 1; continue }
      name = tolower(substr(k, 15))
      if (!(name in declared)) printf "spin-runtime-config: %s: the manifest declares no such variable (Spin ignores it; the settings go in SPIN_VARIABLE_SETTINGS)\n", k > "/dev/stderr"
      value[name] = basic(v)
    }
    if (bad) exit 1
    print "# Spin runtime config: written by spin-runtime-config.sh from the manifest and SPIN_VARIABLE_*."
    print "# Holds secrets: mode 0600, never commit or copy it."
    print "[[variables_provider]]"
    print "type = \"static\""
    print ""
    print "[variables_provider.values]"
    n = 0
    for (k in value) names[++n] = k
    for (i = 2; i <= n; i++) { k = names[i]; for (j = i - 1; j >= 1 && names[j] > k; j--) names[j + 1] = names[j]; names[j + 1] = k }
    for (i = 1; i <= n; i++) print names[i] " = " value[names[i]]
    missing = ""
    for (k in declared) if (!(k in value)) missing = missing " " k
    if (missing != "") printf "spin-runtime-config: no value for%s (Spin will ask its environment provider)\n", missing > "/dev/stderr"
  }
' "$manifest" >"$tmp"
chmod 0600 "$tmp"
mv -f "$tmp" "$out"
trap - EXIT

# Spin's runtime config (runtime-config.toml) with one static variables provider holding a value
# for EVERY variable of the manifest: the values given, then the manifest's defaults. The same
# file as ../../files/spin-runtime-config.sh writes on a self-hosted instance at boot (that
# script says why, citing Spin's source): Spin asks the runtime config's providers first and
# its environment provider (a blocking call per lookup) last, and resolves every app-level
# variable on an instance's first outbound connection, so a variable missing here would still
# cost a blocking lookup.
#
# The manifest's [variables] are read as `name = { ..., default = "..." }` one-line inline
# tables (TOML writes inline tables on one line); a basic-string default is copied as written
# (escapes and all), a literal one re-encoded. Values are written with jsonencode: a JSON string
# is a valid TOML basic string (Terraform escapes ", \, control characters and <>& as \uXXXX).
#
# Provider-free; the output holds every secret given: keep it in a secret store (a Kubernetes
# Secret for SpinKube's runtimeConfig.loadFromSecret).

locals {
  # From the [variables] header to the next table header, or the end.
  variables_section = try(regex("(?ms)^[ \\t]*\\[variables\\][ \\t]*(?:#[^\\n]*)?$(.*?)(?:^[ \\t]*\\[|\\z)", var.manifest)[0], "")
  declarations      = regexall("(?m)^[ \\t]*([a-z][a-z0-9_]*)[ \\t]*=[ \\t]*(\\{.*)$", local.variables_section)

  declared = [for d in local.declarations : d[0]]
  # Each default as a TOML basic string, or null where the manifest gives none.
  defaults_toml = {
    for d in local.declarations : d[0] => try(
      "\"${regex("[{,][ \\t]*default[ \\t]*=[ \\t]*\"((?:[^\"\\\\]|\\\\.)*)\"", d[1])[0]}\"",
      jsonencode(regex("[{,][ \\t]*default[ \\t]*=[ \\t]*'([^']*)'", d[1])[0]),
      null,
    )
  }

  value_names = nonsensitive(toset(keys(var.values)))
  entries = merge(
    { for k, v in local.defaults_toml : k => v if v != null },
    { for k, v in var.values : k => jsonencode(v) },
  )
  names = sort(setunion(local.value_names, [for k, v in local.defaults_toml : k if v != null]))

  toml = join("\n", concat(
    [
      "# Spin runtime config: a static variables provider with every variable of the manifest.",
      "# Holds secrets.",
      "[[variables_provider]]",
      "type = \"static\"",
      "",
      "[variables_provider.values]",
    ],
    [for k in local.names : "${k} = ${local.entries[k]}"],
    [""],
  ))
}

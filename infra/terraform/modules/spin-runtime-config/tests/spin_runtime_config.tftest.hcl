# Offline: the module has no provider.

variables {
  manifest = <<-EOT
    spin_manifest_version = 2
    [application]
    name = "fixture"

    [variables]
    redis_url = { default = "redis://127.0.0.1:6379", secret = true }
    # a comment between declarations
    jwt_secret = { required = true, secret = true }
    quoted = { description = "a default = 1 in prose", default = "say \"hi\" \\o/" }
    literal = { default = 'C:\path "x"' }
    empty = { default = "" }
      indented = { default = "7" }

    [[trigger.http]]
    route = "/..."
    component = "c"
    [component.c]
    source = "c.wasm"
    [component.c.variables]
    redis_url = "{{ redis_url }}"
    not_a_variable = { default = "x" }
  EOT
  values = {
    jwt_secret = "k\"e\\y<&>"
    redis_url  = "rediss://u:p%40@h:6380"
    extra      = "given, not declared"
  }
}

run "every_variable_gets_a_static_value" {
  command = plan

  assert {
    condition     = output.variables == ["redis_url", "jwt_secret", "quoted", "literal", "empty", "indented"]
    error_message = "the [variables] table's declarations, and nothing from other tables"
  }
  assert {
    condition     = output.missing == []
    error_message = "every declared variable has a value"
  }
  assert {
    condition     = startswith(output.toml, "# Spin runtime config") && strcontains(output.toml, "\n[[variables_provider]]\ntype = \"static\"\n\n[variables_provider.values]\n")
    error_message = "one static variables provider"
  }
  assert {
    condition = alltrue([for line in [
      "empty = \"\"",
      "extra = \"given, not declared\"",
      "indented = \"7\"",
      "jwt_secret = \"k\\\"e\\\\y\\u003c\\u0026\\u003e\"",
      "literal = \"C:\\\\path \\\"x\\\"\"",
      "quoted = \"say \\\"hi\\\" \\\\o/\"",
      "redis_url = \"rediss://u:p%40@h:6380\"",
    ] : strcontains(output.toml, "\n${line}\n")])
    error_message = "values win over defaults, every string a valid TOML basic string"
  }
  assert {
    condition     = !strcontains(output.toml, "not_a_variable") && !strcontains(output.toml, "127.0.0.1")
    error_message = "only [variables]; a given value replaces the default"
  }
  assert {
    condition     = issensitive(output.toml)
    error_message = "the runtime config holds secrets"
  }
}

run "a_required_variable_without_value_is_reported" {
  command = plan

  variables {
    values = {}
  }

  assert {
    condition     = output.missing == ["jwt_secret"]
    error_message = "jwt_secret has neither a value nor a default"
  }
}

# The app's manifests (the module's path is infra/terraform/modules/spin-runtime-config).
run "reads_spin_http_toml" {
  command = plan

  variables {
    manifest = file("../../../../spin.http.toml")
  }

  assert {
    condition     = length(output.variables) > 0 && alltrue([for v in output.variables : strcontains(var.manifest, "\n${v} = {")])
    error_message = "spin.http.toml's variables are found"
  }
  assert {
    condition     = length(regexall("(?m)^[a-z][a-z0-9_]* = \\{", split("\n[[", var.manifest)[0])) == length(output.variables)
    error_message = "every declaration before the first array of tables is read"
  }
}

run "reads_spin_toml" {
  command = plan

  variables {
    manifest = file("../../../../spin.toml")
  }

  assert {
    condition     = length(output.variables) > 0 && length(regexall("(?m)^[a-z][a-z0-9_]* = \\{", split("\n[[", var.manifest)[0])) == length(output.variables)
    error_message = "spin.toml's variables are found"
  }
}

output "spin_variables" {
  description = "The app's Spin variables by name (spin.toml's [variables]): the connection variables, the secrets, and `settings` when any setting is given."
  value       = merge(local.spin_variables, local.settings_variable)
  sensitive   = true

  precondition {
    condition     = local.redis_host != null
    error_message = "The Redis nodes have different host:port: set redis_host_pattern to one that matches them all (allowed_outbound_hosts takes a single pattern per scheme)."
  }
  precondition {
    condition     = local.redis_passwords_ok
    error_message = "Give redis_password, or redis_passwords with one password per Redis endpoint."
  }
}

output "hosts" {
  description = "The non-secret variables allowed_outbound_hosts uses (redis_host, pg_host): built from the same endpoints as redis_url and pg_url, so a root can pass them in the clear (spin_variables checks that redis_host is set)."
  value = {
    redis_host = local.redis_host
    pg_host    = local.pg_host
  }
}

output "environment" {
  description = "The same as SPIN_VARIABLE_<NAME> environment variables, for `spin up` or a platform's secret store."
  value       = { for k, v in merge(local.spin_variables, local.settings_variable) : "SPIN_VARIABLE_${upper(k)}" => v }
  sensitive   = true
}

output "allowed_outbound_hosts" {
  description = "What the manifest's allowed_outbound_hosts entries resolve to."
  value       = concat([for h in compact([local.redis_host]) : "rediss://${h}"], ["postgres://${local.pg_host}"])
}

output "settings" {
  description = "The settings as the value of the Spin variable `settings`: name=value pairs in sorted name order, joined by commas (e.g. \"drain_batch=1000,release_batch=500\"); \"\" when none is given."
  value       = local.settings
}

output "settings_variable" {
  description = "{ settings = <the rendered settings> } when any setting is given, else {} (the manifest's default, \"\", stays): merge it into the non-secret variables a root passes in the clear."
  value       = local.settings_variable
}

output "setting_patterns" {
  description = "Each setting's name and the pattern its value must match: what a root's own `settings` input validates against (one list of names, here)."
  value       = local.setting_patterns
}

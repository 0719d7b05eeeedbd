output "spin_variables" {
  description = "The app's Spin variables by name (spin.toml's [variables])."
  value       = local.spin_variables
  sensitive   = true

  precondition {
    condition     = local.redis_host != null
    error_message = "The Redis nodes have different host:port: set redis_host_pattern to one that matches them all (allowed_outbound_hosts takes a single pattern per scheme)."
  }
}

output "environment" {
  description = "The same as SPIN_VARIABLE_<NAME> environment variables, for `spin up` or a platform's secret store."
  value       = { for k, v in local.spin_variables : "SPIN_VARIABLE_${upper(k)}" => v }
  sensitive   = true
}

output "allowed_outbound_hosts" {
  description = "What the manifest's allowed_outbound_hosts entries resolve to."
  value       = concat([for h in compact([local.redis_host]) : "rediss://${h}"], ["postgres://${local.pg_host}"])
}

output "spin_variables" {
  description = "The app's Spin variables by name (spin.toml's [variables]): the connection variables, the payment provider's API (payment_api_url, payment_api_key), the secrets, and `settings` when any setting or trusted proxy is given."
  value       = merge(local.spin_variables, local.settings_variable)
  sensitive   = true

  precondition {
    condition     = local.redis_origin != null
    error_message = "The Redis nodes have different host:port: set redis_host_pattern to one that matches them all (redis_origin, the one allowed_outbound_hosts entry for Redis, takes a single pattern)."
  }
  precondition {
    condition     = length(local.redis_uncovered) == 0
    error_message = "redis_origin ${coalesce(local.redis_origin, "(none)")} does not admit every Redis node: ${join(", ", local.redis_uncovered)}. Set redis_host_pattern to host:port that covers them all (host \"*.domain\" or a name, port a number, \"*\" or \"a..b\")."
  }
  precondition {
    condition     = local.redis_passwords_ok
    error_message = "Give redis_password, or redis_passwords with one password per Redis endpoint."
  }
}

output "hosts" {
  description = "The non-secret variables allowed_outbound_hosts uses: redis_origin (scheme://host:port, the scheme redis_url's nodes use: \"{{ redis_origin }}\" is a whole entry), pg_host (host:port, after \"postgres://\") and payment_api_url (the provider's https:// origin: \"{{ payment_api_url }}\" is a whole entry). redis_origin and pg_host are built from the same endpoints as redis_url and pg_url, so a root can pass them in the clear (spin_variables checks that redis_origin is set and admits every node)."
  value = {
    redis_origin    = local.redis_origin
    pg_host         = local.pg_host
    payment_api_url = var.payment_api_url
  }
}

output "environment" {
  description = "The same as SPIN_VARIABLE_<NAME> environment variables, for `spin up` or a platform's secret store."
  value       = { for k, v in merge(local.spin_variables, local.settings_variable) : "SPIN_VARIABLE_${upper(k)}" => v }
  sensitive   = true
}

output "allowed_outbound_hosts" {
  description = "What the manifests' allowed_outbound_hosts entries resolve to: \"{{ redis_origin }}\", \"postgres://{{ pg_host }}\" and \"{{ payment_api_url }}\"."
  value       = concat(compact([local.redis_origin]), ["postgres://${local.pg_host}", var.payment_api_url])
}

output "settings" {
  description = "The settings as the value of the Spin variable `settings`: name=value pairs in sorted name order, joined by commas, the trusted proxies among them (e.g. \"drain_batch=1000,trusted_proxies=10.40.0.0/24 10.40.1.0/24\"); \"\" when none is given."
  value       = local.settings
}

output "settings_variable" {
  description = "{ settings = <the rendered settings> } when any setting or trusted proxy is given, else {} (the manifest's default, \"\", stays): merge it into the non-secret variables a root passes in the clear."
  value       = local.settings_variable
}

output "setting_patterns" {
  description = "Each setting's name and the pattern its value must match: what a root's own `settings` input validates against (one list of names, here)."
  value       = local.setting_patterns
}

output "scheduler_token" {
  description = "The schedulers' bearer token (var.scheduler_token, the secret of the operators entry scheduler:scheduler:<token>; null when not given): what a scheduler that calls the job routes sends, never a person's secret."
  value       = var.scheduler_token
  sensitive   = true
}

output "manifest" {
  description = "The manifest behind the image (HTTP triggers only)."
  value       = "spin.http.toml"
}

output "app_service_url" {
  description = "The main SpinApp's Service inside the cluster (with gateway, the HTTPRoute <app_name> sends it every request but the critical pairs)."
  value       = local.app_service_url
}

output "critical_service_url" {
  description = "The critical routes' SpinApp's Service inside the cluster (the ticker calls it; with gateway, the HTTPRoute <app_name>-critical sends it the critical pairs)."
  value       = local.critical_service_url
}

output "critical_routes" {
  description = "The critical (route, method) pairs of spin.http.toml (method \"*\": every method the route's entry does not name): what belongs on the critical Service when you route without `gateway`."
  value       = module.request_classes.critical_pairs
}

output "secret_name" {
  description = "The Secret holding the secret Spin variables and Spin's runtime config (key runtime-config.toml: every variable, secrets included, in a static provider)."
  value       = kubernetes_secret_v1.spin.metadata[0].name
}

output "spin_variables" {
  description = "The non-secret variables the SpinApp gets through its runtime config (redis_origin = rediss://host:port, pg_host, payment_api_url, and settings when any setting is given)."
  value       = local.spin_public_variables
}

output "spin_environment" {
  description = "Every variable as SPIN_VARIABLE_<NAME> (e.g. to run `spin up -f spin.http.toml` against the same services)."
  value       = { for k, v in merge(local.spin_public_variables, local.spin_secret_variables) : "SPIN_VARIABLE_${upper(k)}" => v }
  sensitive   = true
}

output "allowed_outbound_hosts" {
  description = "What the manifest's allowed_outbound_hosts entries resolve to: redis_origin (\"{{ redis_origin }}\", one entry for every Redis node), \"postgres://{{ pg_host }}\" and the payment provider's API (\"{{ payment_api_url }}\")."
  value       = module.app_variables.allowed_outbound_hosts
}

output "manifest" {
  description = "The manifest deployed (HTTP triggers only)."
  value       = var.manifest
}

output "platform" {
  description = "akamai (spin aka deploy) or fermyon (spin cloud deploy)."
  value       = var.platform
}

output "redis_endpoints" {
  description = "The Upstash databases (host:port), in redis_url order."
  value       = [for db in upstash_redis_database.redis : "${db.endpoint}:${db.port}"]
}

output "redis_passwords" {
  description = "The Upstash databases' passwords, in redis_url order."
  value       = [for db in upstash_redis_database.redis : db.password]
  sensitive   = true
}

output "redis_rest_tokens" {
  description = "The Upstash databases' REST tokens (for the Upstash console or REST API; the app uses rediss://)."
  value       = [for db in upstash_redis_database.redis : db.rest_token]
  sensitive   = true
}

output "postgres_host" {
  description = "Neon's direct endpoint."
  value       = neon_project.db.database_host
}

output "postgres_connection_uri" {
  description = "Neon's connection URI (psql, scripts/migrate.sh)."
  value       = neon_project.db.connection_uri
  sensitive   = true
}

output "spin_variables" {
  description = "The non-secret variables the app gets (redis_origin = rediss://host:port, pg_host, payment_api_url, and settings when any setting is given)."
  value       = local.spin_public_variables
}

output "spin_environment" {
  description = "Every variable as SPIN_VARIABLE_<NAME> (what the deploy passes, e.g. to run `spin up -f spin.http.toml` locally against these services)."
  value       = local.deploy_environment
  sensitive   = true
}

output "allowed_outbound_hosts" {
  description = "What the manifest's allowed_outbound_hosts entries resolve to: redis_origin (\"{{ redis_origin }}\", one entry for every Redis node), \"postgres://{{ pg_host }}\" and the payment provider's API (\"{{ payment_api_url }}\")."
  value       = module.app_variables.allowed_outbound_hosts
}

output "akamai_cron_jobs" {
  description = "The spin aka cron jobs (name => path and query, which holds job_key), empty on Fermyon Cloud."
  value       = local.akamai_cron_jobs
  sensitive   = true
}

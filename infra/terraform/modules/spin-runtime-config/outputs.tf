output "toml" {
  description = "runtime-config.toml: one static variables provider (holds the secrets given)."
  value       = local.toml
  sensitive   = true
}

output "variables" {
  description = "The variables the manifest declares."
  value       = local.declared
}

output "missing" {
  description = "Declared variables with neither a value nor a default: Spin would fall back to its environment provider for them, and fail at start without one."
  value       = [for k in local.declared : k if !contains(local.names, k)]
}

output "sha256" {
  description = "A digest of the runtime config, for a pod annotation that rolls the pods when it changes (Spin reads the file once, at start). Not secret: the file's secrets are long random strings."
  value       = nonsensitive(sha256(local.toml))
}

# Provider-free: turns endpoints and credentials into the Spin variables of spin.toml and
# spin.http.toml. TLS everywhere: rediss:// to Redis, sslmode=require to Postgres (Spin verifies
# the certificate for any sslmode but disable).

terraform {
  required_version = ">= 1.6"
}

locals {
  redis_addrs = [for e in var.redis_endpoints : "${e.host}:${e.port}"]
  # One password per node: redis_passwords, else redis_password on every node.
  redis_passwords = var.redis_passwords != null ? var.redis_passwords : [for a in local.redis_addrs : var.redis_password]
  redis_passwords_ok = (
    length(local.redis_passwords) == length(local.redis_addrs) &&
    alltrue([for p in local.redis_passwords : p != null])
  )
  redis_url = local.redis_passwords_ok ? join(",", [
    for i, a in local.redis_addrs : "rediss://${urlencode(var.redis_username)}:${urlencode(local.redis_passwords[i])}@${a}"
  ]) : null
  # One value must let the functions reach every node (allowed_outbound_hosts takes a pattern).
  redis_host = var.redis_host_pattern != null ? var.redis_host_pattern : (
    length(distinct(local.redis_addrs)) == 1 ? local.redis_addrs[0] : null
  )

  pg_host = "${var.postgres.host}:${var.postgres.port}"
  pg_url  = "postgres://${urlencode(var.postgres.user)}:${urlencode(var.postgres_password)}@${local.pg_host}/${urlencode(var.postgres.database)}?sslmode=require"

  spin_variables = {
    redis_url        = local.redis_url
    redis_host       = local.redis_host
    pg_url           = local.pg_url
    pg_host          = local.pg_host
    jwt_secret       = var.secrets.jwt_secret
    admission_secret = var.secrets.admission_secret
    admin_token      = var.secrets.admin_token
  }
}

# The app's Spin variables (spin.toml [variables]), computed by the shared module from the same
# endpoints the resources above expose: redis_url (rediss://, every node) and redis_origin
# (rediss://host:port, the one allowed_outbound_hosts entry for Redis) come from one list, pg_url
# (sslmode=require) and pg_host from one address, so allowed_outbound_hosts always admits what
# the URLs name.
#
# What holds a secret (spin.toml `secret = true`: the URLs carry passwords, the three keys, the
# payment provider's webhook signing secrets and its API key)
# goes to Secrets Manager and is read by each instance at start; only names and ARNs are in
# user_data. The rest (redis_origin, pg_host, payment_api_url, and `settings`) is passed in the
# clear.
#
# Spin reads them from a file, not its environment: at each start the service writes every
# variable of spin.toml (these values, then the manifest's defaults) into Spin's runtime config
# as a static variables provider (../files/spin-runtime-config.sh), because each lookup through
# Spin's environment provider is a blocking call and Spin resolves every app-level variable on
# an instance's first outbound connection. The cost: the secrets then live in that file on the
# instance, /run/seckill/runtime-config.toml (tmpfs, mode 0600, owned by the seckill service
# user, removed when the service stops), fetched from Secrets Manager at start; never in
# user_data, and no more in the Terraform state than the Secrets Manager versions below.
#
# runtime = "seckill-host" needs no such file: our host resolves every variable once at start, so
# it takes them from its environment (/etc/seckill/boot.env, and the secrets fetched from Secrets
# Manager at each start into /run/seckill/secrets.env, tmpfs, 0600: files/host-prestart.sh).

module "app_variables" {
  source = "../modules/app-variables"

  redis_endpoints    = local.redis_endpoints
  redis_host_pattern = local.redis_host_pattern
  redis_username     = local.redis_user
  redis_password     = var.redis_password
  postgres = {
    host     = aws_db_instance.postgres.address
    port     = var.postgres_port
    database = var.postgres_database
    user     = var.postgres_app_username
  }
  postgres_password = var.postgres_app_password
  secrets           = var.secrets
  payment_api_url   = var.payment_api_url
  settings          = var.settings
  scheduler_token   = var.scheduler_token
  demo_environment  = var.demo_environment
  # Spin sees the load balancer as the peer: its nodes live in the public subnets, and it appends
  # the client's address to X-Forwarded-For (xff_header_processing_mode "append", app.tf).
  trusted_proxies = local.public_cidrs
}

locals {
  # spin.toml's secret variables: delivered through Secrets Manager.
  spin_secret_variables = {
    redis_url        = module.app_variables.spin_variables.redis_url
    pg_url           = module.app_variables.spin_variables.pg_url
    jwt_secret       = module.app_variables.spin_variables.jwt_secret
    admission_secret = module.app_variables.spin_variables.admission_secret
    operators        = module.app_variables.spin_variables.operators
    # Read by the payment webhook only.
    payment_webhook_secrets = module.app_variables.spin_variables.payment_webhook_secrets
    # The payment provider's API key (pay, jobs, timeout release); "" when not given.
    payment_api_key = module.app_variables.spin_variables.payment_api_key
  }
  # Names only (not sensitive): what for_each and user_data may carry.
  spin_secret_names = ["redis_url", "pg_url", "jwt_secret", "admission_secret", "operators", "payment_webhook_secrets", "payment_api_key"]
  # The names that get a Secrets Manager secret: all but an empty payment_api_key (Secrets
  # Manager stores no empty string). An instance without it keeps spin.toml's default, "": the
  # provider's API off. Whether a key is set is no secret, hence nonsensitive().
  spin_secret_stored = [
    for k in local.spin_secret_names : k if k != "payment_api_key" || nonsensitive(var.secrets.payment_api_key != "")
  ]

  # What allowed_outbound_hosts uses, from the same endpoints as the URLs, and the payment
  # provider's API origin: in the clear.
  spin_host_variables = {
    redis_origin    = module.app_variables.hosts.redis_origin
    pg_host         = module.app_variables.hosts.pg_host
    payment_api_url = module.app_variables.hosts.payment_api_url
  }
  # The non-secret variables (SPIN_VARIABLE_* in the service's environment file): the hosts, the
  # provider's API origin, and `settings` (var.settings and the trusted proxies, rendered by the
  # module).
  spin_public_variables = merge(module.app_variables.settings_variable, local.spin_host_variables)
}

resource "aws_secretsmanager_secret" "spin" {
  for_each                = toset(local.spin_secret_stored)
  name                    = "${var.name}/spin/${each.key}"
  description             = "seckill Spin variable ${each.key} (SPIN_VARIABLE_${upper(each.key)})"
  kms_key_id              = var.secrets_kms_key_id
  recovery_window_in_days = var.secret_recovery_window_days
}

resource "aws_secretsmanager_secret_version" "spin" {
  for_each      = aws_secretsmanager_secret.spin
  secret_id     = each.value.id
  secret_string = local.spin_secret_variables[each.key]
}

# The migration step's secrets (files/migrate.sh), never Spin variables: the master user's URL,
# which runs the migrations, and the password it gives the app's role (pg_url's user).
locals {
  migration_secrets = {
    pg_url       = "postgres://${urlencode(var.postgres_username)}:${urlencode(var.postgres_password)}@${module.app_variables.hosts.pg_host}/${urlencode(var.postgres_database)}?sslmode=require"
    app_password = var.postgres_app_password
  }
}

resource "aws_secretsmanager_secret" "migration" {
  for_each                = toset(["pg_url", "app_password"])
  name                    = "${var.name}/migration/${each.key}"
  description             = "seckill migration step: ${each.key == "pg_url" ? "the master user's URL" : "the app role's password"}"
  kms_key_id              = var.secrets_kms_key_id
  recovery_window_in_days = var.secret_recovery_window_days
}

resource "aws_secretsmanager_secret_version" "migration" {
  for_each      = aws_secretsmanager_secret.migration
  secret_id     = each.value.id
  secret_string = local.migration_secrets[each.key]
}

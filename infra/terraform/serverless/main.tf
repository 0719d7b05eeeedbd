locals {
  app_dir = var.app_dir != null ? var.app_dir : abspath("${path.root}/../../..")
  # The manifests' job_key defaults to "" (no GET ?key= way in); Akamai requires one (variables.tf).
  job_key = var.job_key == null ? "" : var.job_key
}

# --- Redis: Upstash, TLS always on, no eviction (stock and order intents must never be evicted) --

resource "upstash_redis_database" "redis" {
  count          = var.redis_databases
  database_name  = "${var.app_name}-${count.index}"
  region         = "global"
  primary_region = var.upstash_primary_region
  tls            = true
  eviction       = false
}

# --- Postgres: Neon, the direct (non-pooler) endpoint: Spin >= 3.4 pools its connections --------

resource "neon_project" "db" {
  name       = var.app_name
  region_id  = var.neon_region
  pg_version = var.neon_pg_version

  branch {
    name          = "main"
    database_name = var.postgres_database
    role_name     = var.postgres_role
  }
}

# --- The app's variables, from the endpoints above --------------------------------------------

module "app_variables" {
  source = "../modules/app-variables"

  redis_endpoints = [for db in upstash_redis_database.redis : { host = db.endpoint, port = db.port }]
  # Each database has its own password; Upstash's user is "default".
  redis_username     = "default"
  redis_passwords    = [for db in upstash_redis_database.redis : db.password]
  redis_host_pattern = var.redis_databases > 1 ? var.redis_host_pattern : null
  postgres = {
    host     = neon_project.db.database_host
    port     = 5432
    database = neon_project.db.database_name
    user     = neon_project.db.database_user
  }
  postgres_password = neon_project.db.database_password
  secrets           = var.secrets
  payment_api_url   = var.payment_api_url
  settings          = var.settings
  scheduler_token   = var.scheduler_token
  demo_environment  = var.demo_environment
}

locals {
  # The manifest's secret variables.
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
    # Akamai's cron can put a secret only in the URL: it calls the job routes with ?key=.
    job_key = local.job_key
  }
  # What allowed_outbound_hosts uses, from the same endpoints as the URLs, and the payment
  # provider's API origin.
  spin_host_variables = {
    redis_origin    = module.app_variables.hosts.redis_origin
    pg_host         = module.app_variables.hosts.pg_host
    payment_api_url = module.app_variables.hosts.payment_api_url
  }
  # The non-secret variables: the hosts, and `settings` (var.settings rendered by the module)
  # only when a setting is given (else the manifest's default, "", stays).
  spin_public_variables = merge(module.app_variables.settings_variable, local.spin_host_variables)

  # Everything the platform receives, as SPIN_VARIABLE_<NAME>: passed in the environment of the
  # deploy command, never on its Terraform-visible command line.
  deploy_environment = {
    for k, v in merge(local.spin_public_variables, local.spin_secret_variables) : "SPIN_VARIABLE_${upper(k)}" => v
  }
}

# --- Schema: migrations/*.sql, applied before the app is deployed -------------------------------

resource "terraform_data" "migrate" {
  triggers_replace = [
    neon_project.db.id,
    sha256(join("", [for f in fileset("${local.app_dir}/migrations", "*.sql") : filesha256("${local.app_dir}/migrations/${f}")])),
  ]

  provisioner "local-exec" {
    working_dir = local.app_dir
    interpreter = ["/bin/sh", "-c"]
    command     = "sh infra/terraform/files/migrate-locked.sh migrations"
    environment = {
      PG_URL = module.app_variables.spin_variables.pg_url
    }
  }
}

# --- The app: spin aka deploy (Akamai Functions) or spin cloud deploy (Fermyon Cloud) -----------
# Spin's own settings are the platform's here: neither deploy command takes a runtime config,
# environment variables for Spin or a log directory (only the app and its --variable values), so
# this root sets none, and never RUST_BACKTRACE in the deploy command's environment (it is the
# CLI's, not the platform's, but keep it clean). How the platform resolves variables is its
# business; what the app can do is keep the number of variables low.

resource "terraform_data" "deploy" {
  # Redeploy when the variables, the manifest or a component changes.
  triggers_replace = [
    sha256(jsonencode(local.deploy_environment)),
    filesha256("${local.app_dir}/${var.manifest}"),
    sha256(join("", [for f in fileset("${local.app_dir}/target/wasm32-wasip2/release", "*.wasm") : filesha256("${local.app_dir}/target/wasm32-wasip2/release/${f}")])),
    var.platform,
  ]

  provisioner "local-exec" {
    working_dir = local.app_dir
    interpreter = ["/bin/bash", "-c"]
    command     = var.platform == "akamai" ? local.akamai_deploy : local.fermyon_deploy
    environment = merge(local.deploy_environment, {
      SECKILL_MANIFEST         = var.manifest
      SECKILL_APP_NAME         = var.app_name
      SECKILL_AKA_APP_ID       = var.akamai_app_id == null ? "" : var.akamai_app_id
      SECKILL_AKA_ACCESS_TOKEN = var.akamai_access_token == null ? "" : var.akamai_access_token
      SECKILL_VARIABLES_JSON   = jsonencode(merge(local.spin_public_variables, local.spin_secret_variables))
    })
  }

  depends_on = [terraform_data.migrate]
}

locals {
  # Akamai: the variables go in a JSON file (`--variable @file.json`), so no secret reaches any
  # command line. The file is private to the user and removed on exit.
  akamai_deploy = <<-EOT
    set -euo pipefail
    if [ -n "$SECKILL_AKA_ACCESS_TOKEN" ]; then
      SPIN_AKA_ACCESS_TOKEN="$SECKILL_AKA_ACCESS_TOKEN" spin aka login >/dev/null
    fi
    umask 077
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    vars=$dir/variables.json
    printf '%s' "$SECKILL_VARIABLES_JSON" >"$vars"
    if [ -n "$SECKILL_AKA_APP_ID" ]; then
      target=(--app-id "$SECKILL_AKA_APP_ID")
    elif spin aka app status --app-name "$SECKILL_APP_NAME" >/dev/null 2>&1; then
      spin aka app link --app-name "$SECKILL_APP_NAME" >/dev/null 2>&1 || true
      target=()
    else
      target=(--create-name "$SECKILL_APP_NAME")
    fi
    spin aka deploy --no-confirm -f "$SECKILL_MANIFEST" $${target[@]+"$${target[@]}"} --variable "@$vars"
  EOT

  # Fermyon Cloud: `spin cloud deploy` takes variables only as --variable key=value, so the
  # values come from this process's environment into spin's arguments (visible to local `ps`
  # while it runs; never in Terraform's logs or plan).
  fermyon_deploy = <<-EOT
    set -euo pipefail
    args=()
    for env_name in $(compgen -e | grep '^SPIN_VARIABLE_'); do
      name=$(printf '%s' "$${env_name#SPIN_VARIABLE_}" | tr '[:upper:]' '[:lower:]')
      args+=(--variable "$name=$${!env_name}")
    done
    spin cloud deploy -f "$SECKILL_MANIFEST" "$${args[@]}"
  EOT
}

# --- The scheduler on Akamai: spin aka cron calls the job routes every 5 minutes; each call keeps
# working for akamai_drain_for_ms (the app's ?for_ms=N). Between calls, the poll-carried drain
# (poll_drain_ms, a literal of spin.http.toml's poll component: 1000) moves orders. Fermyon Cloud
# has no scheduler: there the poll-carried drain alone does it (or an external scheduler calling
# the same routes).

locals {
  # spin aka cron sends a GET to a path and query, with no header: the job routes accept GET
  # with ?key=<job_key> for exactly this caller.
  akamai_cron_jobs = var.platform != "akamai" ? {} : {
    "${var.app_name}-drain"           = "/admin/jobs/drain?for_ms=${var.akamai_drain_for_ms}&key=${local.job_key}"
    "${var.app_name}-timeout-release" = "/admin/jobs/timeout-release?for_ms=${var.akamai_drain_for_ms}&key=${local.job_key}"
    "${var.app_name}-reconcile"       = "/admin/jobs/reconcile?key=${local.job_key}"
    "${var.app_name}-deliver-events"  = "/admin/jobs/deliver-events?for_ms=${var.akamai_drain_for_ms}&key=${local.job_key}"
  }
}

resource "terraform_data" "akamai_cron" {
  for_each = local.akamai_cron_jobs
  input = {
    name           = each.key
    app_name       = var.app_name
    schedule       = var.akamai_cron_schedule
    path_and_query = each.value
  }
  triggers_replace = [terraform_data.deploy.id, var.akamai_cron_schedule, each.value]

  provisioner "local-exec" {
    working_dir = local.app_dir
    interpreter = ["/bin/bash", "-c"]
    command     = <<-EOT
      set -euo pipefail
      spin aka cron delete --app-name "${self.input.app_name}" "${self.input.name}" >/dev/null 2>&1 || true
      spin aka cron create --app-name "${self.input.app_name}" --name "${self.input.name}" \
        --schedule "${self.input.schedule}" --path-and-query "${self.input.path_and_query}"
    EOT
  }

  provisioner "local-exec" {
    when        = destroy
    interpreter = ["/bin/bash", "-c"]
    command     = "spin aka cron delete --app-name '${self.input.app_name}' '${self.input.name}' || true"
  }
}

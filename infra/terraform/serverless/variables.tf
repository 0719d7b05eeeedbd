# --- Accounts ---------------------------------------------------------------------------------

variable "upstash_email" {
  description = "The Upstash account's e-mail (API access)."
  type        = string
}

variable "upstash_api_key" {
  description = "An Upstash management API key."
  type        = string
  sensitive   = true
}

variable "neon_api_key" {
  description = "A Neon API key."
  type        = string
  sensitive   = true
}

variable "akamai_access_token" {
  description = "An Akamai Functions personal access token (SPIN_AKA_ACCESS_TOKEN for `spin aka login`); null when the machine running Terraform is already logged in. Unused for Fermyon Cloud (log in with `spin cloud login` first)."
  type        = string
  default     = null
  sensitive   = true
}

# --- Where the app runs -----------------------------------------------------------------------

variable "platform" {
  description = "\"akamai\" (spin aka deploy, with spin aka cron schedules) or \"fermyon\" (spin cloud deploy: the `spin deploy` default)."
  type        = string
  default     = "akamai"
  validation {
    condition     = contains(["akamai", "fermyon"], var.platform)
    error_message = "platform is \"akamai\" or \"fermyon\"."
  }
}

variable "app_name" {
  description = "The app's name on the platform."
  type        = string
  default     = "seckill"
}

variable "akamai_app_id" {
  description = "Deploy to this existing Akamai Functions app (otherwise the app named app_name is linked, or created)."
  type        = string
  default     = null
}

variable "app_dir" {
  description = "The repository checkout holding the manifest, the built .wasm files and migrations/ (build first: cargo build --target wasm32-wasip2 --release). Default: this repository."
  type        = string
  default     = null
}

variable "manifest" {
  description = "The manifest to deploy: the cron-free one (these platforms reject custom triggers)."
  type        = string
  default     = "spin.http.toml"
  validation {
    condition     = var.manifest != "spin.toml"
    error_message = "spin.toml has [[trigger.cron]], which Akamai Functions and Fermyon Cloud reject: deploy spin.http.toml."
  }
}

variable "settings" {
  description = "Optional settings of the app over their defaults, by name: drain_batch, drain_max_batches, drain_lease_ms, drain_reclaim_idle_ms, drain_max_deliveries, release_batch (whole numbers), demo_login (\"false\"; \"true\" only with demo_environment), payment_mode (\"test\" or \"live\": the provider's mode payments are taken in). Passed in the clear as the one Spin variable `settings` of the manifest, the pairs joined by commas in name order (\"drain_batch=1000,release_batch=500\"); empty, the manifest's default stays. The connection variables and the secrets are set by this configuration."
  type        = map(string)
  default     = {}
  validation {
    # The names and what each accepts: modules/app-variables (setting_patterns), the one list.
    condition     = alltrue([for k, v in var.settings : can(regex(module.app_variables.setting_patterns[k], v))])
    error_message = "settings: each name is one of ${join(", ", keys(module.app_variables.setting_patterns))}; demo_login is \"false\" (\"true\" only with demo_environment = true), payment_mode \"test\" or \"live\", admission_ipv6_prefix 1 to 128, the others whole numbers (0 to 999999999). Refused: ${join(", ", [for k, v in var.settings : "${k}=${v}" if !can(regex(module.app_variables.setting_patterns[k], v))])}."
  }
}

# --- The scheduler (Akamai) -------------------------------------------------------------------

variable "akamai_drain_for_ms" {
  description = "How long each scheduled drain / timeout-release request keeps working (GET /admin/jobs/<job>?for_ms=N&key=…; the app caps it at 60000). Keep it under the platform's longest request."
  type        = number
  default     = 30000
  validation {
    condition     = var.akamai_drain_for_ms >= 0 && var.akamai_drain_for_ms <= 60000
    error_message = "akamai_drain_for_ms: 0 to 60000."
  }
}

variable "job_key" {
  description = "Akamai only: the key `spin aka cron` puts in the job routes' URL (?key=), since it can send no header. It runs the idempotent jobs and nothing else; at least 32 characters."
  type        = string
  default     = null
  sensitive   = true
  validation {
    condition     = var.job_key == null ? var.platform != "akamai" : length(var.job_key) >= 32
    error_message = "job_key: at least 32 characters, and required on Akamai (its cron authenticates with it)."
  }
}

variable "akamai_cron_schedule" {
  description = "How often `spin aka cron` calls the job routes (5 minutes is the finest Akamai allows; no lists or ranges)."
  type        = string
  default     = "*/5 * * * *"
}

# --- Redis (Upstash) --------------------------------------------------------------------------

variable "redis_databases" {
  description = "How many Upstash databases: every event's stock shards are dealt out over them (redis_url lists them all). One database takes about 10,000 commands/s on the free and pay-as-you-go plans, and a buy is one EVALSHA."
  type        = number
  default     = 1
  validation {
    condition     = var.redis_databases >= 1 && var.redis_databases <= 16 && floor(var.redis_databases) == var.redis_databases
    error_message = "redis_databases: a whole number from 1 to 16."
  }
}

variable "upstash_primary_region" {
  description = "Where the Upstash databases' primary lives: near the functions' main region and Neon's."
  type        = string
  default     = "us-east-1"
}

variable "redis_host_pattern" {
  description = "With several databases, the host:port pattern that covers them all, no scheme (redis_origin is rediss:// and this)."
  type        = string
  default     = "*.upstash.io:6379"
}

# --- Postgres (Neon) --------------------------------------------------------------------------

variable "neon_region" {
  description = "The Neon region."
  type        = string
  default     = "aws-us-east-1"
}

variable "neon_pg_version" {
  description = "Postgres major version."
  type        = number
  default     = 16
}

variable "postgres_database" {
  description = "Database name."
  type        = string
  default     = "seckill"
}

variable "postgres_role" {
  description = "The role the app and the migrations use."
  type        = string
  default     = "seckill"
}

# --- Secrets ----------------------------------------------------------------------------------

variable "secrets" {
  description = "The app's secrets: jwt_secret (HS256 key of the shop's login tokens), admission_secret (HMAC key of admission tokens and challenges), operators (name:role:secret entries separated by commas, role viewer, operator or scheduler; the secret is that one's bearer token, and one name may hold two secrets while one is rotated), payment_webhook_secrets (the payment provider's webhook signing secrets, Stripe's `whsec_…`, comma-separated: the old and the new one during a rotation), at least 32 characters each; and payment_api_key, the payment provider's restricted secret key (Stripe's `rk_test_…` / `rk_live_…`, of the mode the setting payment_mode names, with Checkout Sessions: Write, PaymentIntents: Read and Refunds: Write only): optional, but without it (\"\", the default) the provider's API is off and no buyer gets a checkout, so a real sale needs it."
  type = object({
    jwt_secret              = string
    admission_secret        = string
    operators               = string
    payment_webhook_secrets = string
    payment_api_key         = optional(string, "")
  })
  sensitive = true
  validation {
    condition     = alltrue([for k, v in var.secrets : length(v) >= 32 if k != "payment_api_key"])
    error_message = "Use at least 32 characters for each secret (payment_api_key apart: the provider makes it)."
  }
  validation {
    condition     = alltrue([for s in split(",", var.secrets.payment_webhook_secrets) : length(trimspace(s)) >= 32])
    error_message = "payment_webhook_secrets: one or more signing secrets separated by commas, each at least 32 characters (Stripe's whsec_…)."
  }
  validation {
    condition     = var.secrets.payment_api_key == "" || can(regex("^rk_(test|live)_[0-9A-Za-z]{24,}$", var.secrets.payment_api_key))
    error_message = "payment_api_key: \"\" (the provider's API off) or a Stripe restricted key, rk_test_… or rk_live_…, with Checkout Sessions: Write, PaymentIntents: Read and Refunds: Write; not a secret key (sk_…), which may do anything on the account."
  }
  validation {
    # A key of the other mode would open sessions whose payments the app then ignores.
    condition     = var.secrets.payment_api_key == "" || startswith(var.secrets.payment_api_key, "rk_${lookup(var.settings, "payment_mode", "test")}_")
    error_message = "payment_api_key: settings' payment_mode is ${lookup(var.settings, "payment_mode", "test")}, so the key is an rk_${lookup(var.settings, "payment_mode", "test")}_… one (the provider's events of the other mode are ignored: no payment would count)."
  }
}

variable "scheduler_token" {
  description = "The bearer token of an outside scheduler that calls the job routes (Fermyon Cloud has none of its own): added to operators as scheduler:scheduler:<token>, a role that runs the job routes (/admin/jobs/*) and nothing else, sent as `Authorization: Bearer <token>`. Null (the default): no such entry. Akamai's cron can send no header: it uses job_key."
  type        = string
  default     = null
  sensitive   = true
  validation {
    condition     = var.scheduler_token == null ? true : can(regex("^[A-Za-z0-9._~+/-]{32,}=*$", var.scheduler_token))
    error_message = "scheduler_token: at least 32 of A-Z a-z 0-9 . _ ~ + / - (then = padding), e.g. openssl rand -hex 32; it is sent as `Authorization: Bearer <token>`."
  }
}

variable "demo_environment" {
  description = "Whether this deployment is a demo: only then may settings' demo_login be \"true\" (anyone may mint a buyer token and buy as anyone). False by default: the plan refuses demo_login = \"true\"."
  type        = bool
  default     = false
  nullable    = false
}

variable "payment_api_url" {
  description = "The payment provider's API origin (Stripe's by default), passed in the clear as the Spin variable payment_api_url: also the whole allowed_outbound_hosts entry \"{{ payment_api_url }}\" of the pay, jobs and timeout-release components."
  type        = string
  default     = "https://api.stripe.com"
  validation {
    condition     = can(regex("^https://[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$", var.payment_api_url))
    error_message = "payment_api_url: an https:// origin, scheme, host and an optional port, without a path or a trailing slash (https://api.stripe.com)."
  }
}

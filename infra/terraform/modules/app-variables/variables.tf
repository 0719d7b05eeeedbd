variable "redis_endpoints" {
  description = "The Redis nodes (TLS), the stock shards of every event are dealt out over them: host and port of each."
  type = list(object({
    host = string
    port = number
  }))
  validation {
    condition     = length(var.redis_endpoints) > 0
    error_message = "Give at least one Redis endpoint."
  }
}

variable "redis_host_pattern" {
  description = "The host:port pattern that covers every node, without a scheme: the module puts redis_url's scheme in front to make redis_origin (\"*.cache.example.com:6379\" becomes \"rediss://*.cache.example.com:6379\"). Spin's rules: the host is a name, \"*\" or \"*.domain\"; the port is written out (rediss has no default port), \"*\" or a range \"a..b\". Needed only when the nodes do not share one host:port."
  type        = string
  default     = null
  validation {
    condition     = var.redis_host_pattern == null ? true : can(regex("^[^:/]+:(\\*|[0-9]+|[0-9]+\\.\\.[0-9]+)$", var.redis_host_pattern))
    error_message = "redis_host_pattern is host:port with the port written out (e.g. \"*.cache.example.com:6379\"), no scheme: the module adds redis_url's (rediss://), which has no default port."
  }
}

variable "redis_username" {
  description = "The Redis ACL user."
  type        = string
  default     = "default"
}

variable "redis_password" {
  description = "The Redis password, the same on every node (or give redis_passwords)."
  type        = string
  default     = null
  sensitive   = true
  validation {
    condition     = var.redis_password == null ? true : length(var.redis_password) > 0
    error_message = "A managed Redis needs a password."
  }
}

variable "redis_passwords" {
  description = "One password per node, in redis_endpoints order, where the nodes' passwords differ (e.g. several Upstash databases). Takes precedence over redis_password."
  type        = list(string)
  default     = null
  sensitive   = true
  validation {
    condition     = var.redis_passwords == null ? true : alltrue([for p in var.redis_passwords : length(p) > 0])
    error_message = "A managed Redis needs a password."
  }
}

variable "postgres" {
  description = "The orders database: host, port, database and user."
  type = object({
    host     = string
    port     = optional(number, 5432)
    database = string
    user     = string
  })
}

variable "postgres_password" {
  description = "The orders database password."
  type        = string
  sensitive   = true
  validation {
    condition     = length(var.postgres_password) > 0
    error_message = "The orders database needs a password."
  }
}

variable "secrets" {
  description = "The app's secrets: jwt_secret (HS256 key of the shop's login tokens: buyers are whoever its tokens say), admission_secret (HMAC key of admission tokens and challenges), operators (name:role:secret entries separated by commas, role viewer, operator or scheduler; the secret is that one's bearer token, and one name may hold two secrets while one is rotated; scheduler_token adds the scheduler's entry), payment_webhook_secrets (the payment provider's webhook signing secrets, Stripe's `whsec_…`, comma-separated: during a rotation the old and the new one), payment_api_key (optional: the payment provider's restricted secret key, Stripe's `rk_test_…` / `rk_live_…` with Checkout Sessions: Write, PaymentIntents: Read and Refunds: Write, of the mode the setting payment_mode names; \"\", the default, turns the provider's API off: no checkout, so a real sale needs it)."
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
    condition = alltrue([
      for e in split(",", var.secrets.operators) : can(regex("^[A-Za-z0-9._@-]{1,64}:(viewer|operator|scheduler):[^,]{32,}$", trimspace(e)))
      ]) && anytrue([
      for e in split(",", var.secrets.operators) : can(regex("^[^:]+:operator:", trimspace(e)))
    ])
    error_message = "operators: name:role:secret entries separated by commas (a name is 1-64 of A-Z a-z 0-9 . _ @ -, a role viewer, operator or scheduler, a secret at least 32 characters), at least one of them an operator."
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
    error_message = "payment_api_key: payment_mode is ${lookup(var.settings, "payment_mode", "test")}, so the key is an rk_${lookup(var.settings, "payment_mode", "test")}_… one (the provider's events of the other mode are ignored: no payment would count)."
  }
}

variable "scheduler_token" {
  description = "The bearer token of the schedulers that call the job routes over HTTP (SpinKube's ticker, an outside cron): rendered as one more operators entry, scheduler:scheduler:<token>, whose role runs the job routes (/admin/jobs/*) and nothing else, so no scheduler holds a person's secret. At least 32 of A-Z a-z 0-9 . _ ~ + / - (then = padding), as a Bearer token is written. Null (the default): no such entry."
  type        = string
  default     = null
  sensitive   = true
  validation {
    condition     = var.scheduler_token == null ? true : can(regex("^[A-Za-z0-9._~+/-]{32,}=*$", var.scheduler_token))
    error_message = "scheduler_token: at least 32 of A-Z a-z 0-9 . _ ~ + / - (then = padding), e.g. openssl rand -hex 32; it is sent as `Authorization: Bearer <token>` and is an entry of the comma-separated operators."
  }
}

variable "demo_environment" {
  description = "Whether this deployment is a demo: only then may the setting demo_login be \"true\" (anyone may mint a buyer token, so anyone may buy as anyone)."
  type        = bool
  default     = false
  nullable    = false
}

variable "payment_api_url" {
  description = "The payment provider's API origin (Stripe's by default): https://host[:port], no path. The Spin variable payment_api_url, which is also the whole allowed_outbound_hosts entry \"{{ payment_api_url }}\" of the pay, jobs and timeout-release components."
  type        = string
  default     = "https://api.stripe.com"
  nullable    = false
  validation {
    condition     = can(regex("^https://[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$", var.payment_api_url))
    error_message = "payment_api_url: an https:// origin, scheme, host and an optional port, without a path or a trailing slash (https://api.stripe.com)."
  }
}

variable "settings" {
  description = "Optional settings of the app over their defaults, by name: drain_batch, drain_max_batches, drain_lease_ms, drain_reclaim_idle_ms, drain_max_deliveries, release_batch (whole numbers), demo_login (\"false\"; \"true\" only with demo_environment), payment_mode (\"test\" or \"live\": the provider's mode payments are taken in), admission_ipv6_prefix (1 to 128: the IPv6 prefix whose addresses share one admission bucket), order_events_disable_after_s and order_events_keep_days (how long an order events endpoint may fail before it is disabled; the days events are kept). Rendered into the one Spin variable `settings`, with trusted_proxies (its own input)."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for k, v in var.settings : can(regex(local.setting_patterns[k], v))])
    error_message = "settings: each name is one of ${join(", ", keys(local.setting_patterns))}; demo_login is \"false\" (or \"true\" with demo_environment = true: a demo, where anyone may be anyone), payment_mode \"test\" or \"live\", admission_ipv6_prefix 1 to 128, the others whole numbers (0 to 999999999). Refused: ${join(", ", [for k, v in var.settings : "${k}=${v}" if !can(regex(local.setting_patterns[k], v))])}."
  }
}

variable "trusted_proxies" {
  description = "CIDR ranges of the proxies in front of the app (a load balancer, an ingress): only from them is X-Forwarded-For believed, the client being its right-most entry that is not one of them. Rendered into `settings` as trusted_proxies=<cidr> <cidr> … (space-separated). Empty: the peer is the client and the header is ignored."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.trusted_proxies : can(cidrhost(c, 0))])
    error_message = "trusted_proxies: CIDR ranges such as 10.40.0.0/24 or fd00::/8. Refused: ${join(", ", [for c in var.trusted_proxies : c if !can(cidrhost(c, 0))])}."
  }
}

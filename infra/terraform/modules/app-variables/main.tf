# Provider-free: turns endpoints and credentials into the Spin variables of spin.toml and
# spin.http.toml. TLS everywhere: rediss:// to Redis, sslmode=require to Postgres (Spin verifies
# the certificate for any sslmode but disable), https:// to the payment provider's API. The
# optional settings and the trusted proxies become the one variable `settings`.
#
# redis_origin is what each component's allowed_outbound_hosts entry "{{ redis_origin }}" becomes:
# scheme://host:port with the one scheme redis_url's nodes use (rediss: this module builds TLS
# URLs only), so real Spin, which resolves a whole-template entry and then parses it, admits
# every node and parses one Redis entry per instance instead of one per scheme.

terraform {
  required_version = ">= 1.9" # a variable validation that refers to a local
}

locals {
  redis_addrs = [for e in var.redis_endpoints : "${e.host}:${e.port}"]
  # One password per node: redis_passwords, else redis_password on every node.
  redis_passwords = var.redis_passwords != null ? var.redis_passwords : [for a in local.redis_addrs : var.redis_password]
  redis_passwords_ok = (
    length(local.redis_passwords) == length(local.redis_addrs) &&
    alltrue([for p in local.redis_passwords : p != null])
  )
  # The one scheme the functions reach Redis by: every node of redis_url and redis_origin use it.
  # rediss (TLS) has no default port in Spin: every host:port below writes the port out.
  redis_scheme = "rediss"
  redis_url = local.redis_passwords_ok ? join(",", [
    for i, a in local.redis_addrs : "${local.redis_scheme}://${urlencode(var.redis_username)}:${urlencode(local.redis_passwords[i])}@${a}"
  ]) : null
  # One host:port must let the functions reach every node (allowed_outbound_hosts takes a pattern):
  # the pattern given, else the nodes' one host:port.
  redis_host = var.redis_host_pattern != null ? var.redis_host_pattern : (
    length(distinct(local.redis_addrs)) == 1 ? local.redis_addrs[0] : null
  )
  redis_origin = local.redis_host != null ? "${local.redis_scheme}://${local.redis_host}" : null
  # The nodes redis_host does not cover, by Spin's rules (crates/outbound-networking-config/src/
  # allowed_hosts.rs): host "*", "*.domain" (any name ending in .domain) or the exact name; port
  # "*", a range "a..b" (b excluded) or the exact number.
  redis_host_parts = try(regex("^([^:/]+):([^:/]+)$", local.redis_host), null)
  redis_uncovered = local.redis_host_parts == null ? local.redis_addrs : [
    for e in var.redis_endpoints : "${e.host}:${e.port}" if !try(
      (
        local.redis_host_parts[0] == "*" ? true : startswith(local.redis_host_parts[0], "*.") ? (
          endswith(e.host, trimprefix(local.redis_host_parts[0], "*"))
        ) : local.redis_host_parts[0] == e.host
        ) && (
        local.redis_host_parts[1] == "*" ? true : strcontains(local.redis_host_parts[1], "..") ? (
          e.port >= tonumber(split("..", local.redis_host_parts[1])[0]) && e.port < tonumber(split("..", local.redis_host_parts[1])[1])
        ) : local.redis_host_parts[1] == tostring(e.port)
      ),
      false
    )
  ]

  pg_host = "${var.postgres.host}:${var.postgres.port}"
  pg_url  = "postgres://${urlencode(var.postgres.user)}:${urlencode(var.postgres_password)}@${local.pg_host}/${urlencode(var.postgres.database)}?sslmode=require"

  # The operators' entries as given, then the schedulers' own (scheduler_token): a credential that
  # runs the job routes and nothing else, so no scheduler holds a person's secret.
  operators = var.scheduler_token == null ? var.secrets.operators : "${var.secrets.operators},scheduler:scheduler:${var.scheduler_token}"

  spin_variables = {
    redis_url        = local.redis_url
    redis_origin     = local.redis_origin
    pg_url           = local.pg_url
    pg_host          = local.pg_host
    jwt_secret       = var.secrets.jwt_secret
    admission_secret = var.secrets.admission_secret
    operators        = local.operators
    # Comma-separated: during a rotation the old and the new one both verify.
    payment_webhook_secrets = var.secrets.payment_webhook_secrets
    # The payment provider's API: its origin (also the allowed_outbound_hosts entry
    # "{{ payment_api_url }}" of pay, jobs and timeout-release) and the restricted key ("": off).
    payment_api_url = var.payment_api_url
    payment_api_key = var.secrets.payment_api_key
  }

  # The app's optional settings and their defaults (crates/spin-edge/src/config.rs, `Settings`):
  # the one list of names in this Terraform. They travel as ONE Spin variable, `settings`, not
  # one variable each: real Spin resolves every app-level variable on each instance's first
  # outbound connection, whichever the app reads.
  setting_defaults = {
    drain_batch                  = "500"    # orders per Postgres transaction
    drain_max_batches            = "200"    # transactions per drain run and event
    drain_lease_ms               = "30000"  # how long a drainer owns an event
    drain_reclaim_idle_ms        = "30000"  # idle time before an entry is delivered again
    drain_max_deliveries         = "5"      # deliveries before an entry goes to the dead letters
    release_batch                = "1000"   # timeout release: orders / units per event per run
    demo_login                   = "false"  # "true": anyone may mint a buyer token (demos only)
    payment_mode                 = "test"   # the provider's mode payments are taken in: test or live
    admission_ipv6_prefix        = "64"     # the IPv6 prefix whose addresses share one admission bucket
    order_events_disable_after_s = "432000" # an order events endpoint failing this long is disabled
    order_events_keep_days       = "7"      # days order events and their delivery log are kept
  }
  # What each setting accepts: "true" or "false" where the default is one, "test" or "live"
  # where it is one of those, else a whole number (at most 9 digits: every setting's type holds
  # it); admission_ipv6_prefix 1 to 128, and demo_login "true" only in a demo environment
  # (var.demo_environment): anyone could then be anyone. The app refuses anything else, an
  # unknown name too, at run time.
  # The app's trusted_proxies is not among them: it is var.trusted_proxies, which a root derives
  # from its network.
  setting_patterns = merge({
    for k, d in local.setting_defaults : k => (
      contains(["true", "false"], d) ? "^(true|false)$" : contains(["test", "live"], d) ? "^(test|live)$" : "^[0-9]{1,9}$"
    )
    }, {
    admission_ipv6_prefix = "^([1-9]|[1-9][0-9]|1[01][0-9]|12[0-8])$"
    demo_login            = var.demo_environment ? "^(true|false)$" : "^false$"
  })
  setting_values = merge(var.settings, length(var.trusted_proxies) > 0 ? {
    trusted_proxies = join(" ", var.trusted_proxies)
  } : {})
  # name=value pairs in sorted name order, joined by commas ("" when none is given); only a
  # non-empty map sets the variable, an empty one leaves the manifest's default ("").
  settings          = join(",", [for k in sort(keys(local.setting_values)) : "${k}=${local.setting_values[k]}"])
  settings_variable = length(local.setting_values) > 0 ? { settings = local.settings } : {}
}

# Offline: the module has no provider.

variables {
  redis_endpoints   = [{ host = "redis-1.cache.example.com", port = 6379 }]
  redis_password    = "p@ss/word"
  postgres          = { host = "db.example.com", database = "seckill", user = "app" }
  postgres_password = "s3cret&?"
  secrets = {
    jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
    admission_secret        = "admission-secret-admission-secret-0"
    operators               = "ann:operator:ann-secret-ann-secret-ann-secret-ann-, vic:viewer:vic-secret-vic-secret-vic-secret-vic-"
    payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
  }
}

run "one_node_over_tls" {
  command = plan

  assert {
    condition     = output.spin_variables.redis_url == "rediss://default:p%40ss%2Fword@redis-1.cache.example.com:6379"
    error_message = "Redis URL: rediss://, the password URL-encoded"
  }
  assert {
    condition     = output.spin_variables.redis_origin == "rediss://redis-1.cache.example.com:6379"
    error_message = "redis_origin is the node's host:port behind redis_url's scheme, the port written out"
  }
  assert {
    condition     = split("://", output.hosts.redis_origin)[0] == split("://", output.spin_variables.redis_url)[0]
    error_message = "redis_origin's scheme is redis_url's (one allowed_outbound_hosts entry for Redis)"
  }
  assert {
    condition     = !contains(keys(output.spin_variables), "redis_host") && !contains(keys(output.environment), "SPIN_VARIABLE_REDIS_HOST")
    error_message = "redis_host is gone: redis_origin replaces it"
  }
  assert {
    condition     = output.spin_variables.pg_url == "postgres://app:s3cret%26%3F@db.example.com:5432/seckill?sslmode=require"
    error_message = "Postgres URL: TLS required, the password URL-encoded"
  }
  assert {
    condition     = output.environment["SPIN_VARIABLE_OPERATORS"] == var.secrets.operators
    error_message = "every variable is offered as SPIN_VARIABLE_<NAME>"
  }
  assert {
    condition     = output.environment["SPIN_VARIABLE_PAYMENT_WEBHOOK_SECRETS"] == var.secrets.payment_webhook_secrets
    error_message = "the payment provider's webhook signing secrets are offered as SPIN_VARIABLE_PAYMENT_WEBHOOK_SECRETS"
  }
  assert {
    condition     = output.spin_variables.payment_api_url == "https://api.stripe.com" && output.hosts.payment_api_url == "https://api.stripe.com"
    error_message = "payment_api_url defaults to Stripe's API, offered in the clear with the other hosts"
  }
  assert {
    condition     = output.spin_variables.payment_api_key == "" && output.environment["SPIN_VARIABLE_PAYMENT_API_KEY"] == ""
    error_message = "payment_api_key is optional: none given, it is \"\" (the provider's API off), still set like every other variable"
  }
  assert {
    condition     = length(output.environment) == 10
    error_message = "the ten variables of spin.toml a deployment sets (job_key and settings apart)"
  }
  assert {
    condition     = output.settings == "" && length(output.settings_variable) == 0 && !contains(keys(output.spin_variables), "settings")
    error_message = "no settings given: the variable settings is not set (the manifest's default stays)"
  }
  assert {
    condition     = output.allowed_outbound_hosts == ["rediss://redis-1.cache.example.com:6379", "postgres://db.example.com:5432", "https://api.stripe.com"]
    error_message = "the hosts the manifest must allow"
  }
}

run "several_nodes_share_a_pattern" {
  command = plan

  variables {
    redis_endpoints = [
      { host = "a.cache.example.com", port = 6379 },
      { host = "b.cache.example.com", port = 6379 },
    ]
    redis_host_pattern = "*.cache.example.com:6379"
  }

  assert {
    condition     = length(split(",", output.spin_variables.redis_url)) == 2
    error_message = "every node in redis_url, comma-separated"
  }
  assert {
    condition     = output.spin_variables.redis_origin == "rediss://*.cache.example.com:6379"
    error_message = "one pattern reaches every node, behind redis_url's scheme"
  }
  assert {
    condition     = output.allowed_outbound_hosts == ["rediss://*.cache.example.com:6379", "postgres://db.example.com:5432", "https://api.stripe.com"]
    error_message = "one Redis entry, then Postgres, then the payment provider's API"
  }
}

run "a_port_range_or_any_host_covers_the_nodes" {
  command = plan

  variables {
    redis_endpoints = [
      { host = "10.0.1.5", port = 6379 },
      { host = "redis-b.internal", port = 6380 },
    ]
    redis_host_pattern = "*:6379..6381"
  }

  assert {
    condition     = output.hosts.redis_origin == "rediss://*:6379..6381"
    error_message = "Spin's host \"*\" and port range a..b (b excluded) cover both nodes"
  }
}

run "a_pattern_that_misses_a_node" {
  command = plan

  variables {
    redis_endpoints = [
      { host = "a.cache.example.com", port = 6379 },
      { host = "b.other.example.com", port = 6379 },
    ]
    redis_host_pattern = "*.cache.example.com:6379"
  }

  expect_failures = [output.spin_variables]
}

run "a_pattern_on_another_port" {
  command = plan

  variables {
    redis_endpoints = [
      { host = "a.cache.example.com", port = 6380 },
      { host = "b.cache.example.com", port = 6380 },
    ]
    redis_host_pattern = "*.cache.example.com:6379"
  }

  expect_failures = [output.spin_variables]
}

run "a_range_that_excludes_its_end" {
  command = plan

  variables {
    redis_endpoints = [
      { host = "a.cache.example.com", port = 6379 },
      { host = "b.cache.example.com", port = 6380 },
    ]
    redis_host_pattern = "*.cache.example.com:6379..6380"
  }

  expect_failures = [output.spin_variables]
}

run "a_pattern_with_a_scheme_is_refused" {
  command = plan

  variables {
    redis_endpoints = [
      { host = "a.cache.example.com", port = 6379 },
      { host = "b.cache.example.com", port = 6379 },
    ]
    redis_host_pattern = "rediss://*.cache.example.com:6379"
  }

  expect_failures = [var.redis_host_pattern]
}

run "a_pattern_without_a_port_is_refused" {
  command = plan

  variables {
    redis_endpoints = [
      { host = "a.cache.example.com", port = 6379 },
      { host = "b.cache.example.com", port = 6379 },
    ]
    redis_host_pattern = "*.cache.example.com"
  }

  expect_failures = [var.redis_host_pattern]
}

run "several_nodes_need_a_pattern" {
  command = plan

  variables {
    redis_endpoints = [
      { host = "a.cache.example.com", port = 6379 },
      { host = "b.cache.example.com", port = 6379 },
    ]
  }

  expect_failures = [output.spin_variables]
}

run "short_secrets_are_refused" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "ann:operator:short"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
    }
  }

  expect_failures = [var.secrets]
}

run "webhook_secrets_rotate_as_a_list" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "ann:operator:ann-secret-ann-secret-ann-secret-ann-, vic:viewer:vic-secret-vic-secret-vic-secret-vic-"
      payment_webhook_secrets = "whsec_old-webhook-secret-old-webhook-00,whsec_new-webhook-secret-new-webhook-00"
    }
  }

  assert {
    condition     = output.spin_variables.payment_webhook_secrets == "whsec_old-webhook-secret-old-webhook-00,whsec_new-webhook-secret-new-webhook-00"
    error_message = "during a rotation both signing secrets travel, comma-separated"
  }
}

run "a_short_webhook_secret_in_the_list_is_refused" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "ann:operator:ann-secret-ann-secret-ann-secret-ann-, vic:viewer:vic-secret-vic-secret-vic-secret-vic-"
      payment_webhook_secrets = "whsec_old-webhook-secret-old-webhook-00,whsec_x"
    }
  }

  expect_failures = [var.secrets]
}

run "operators_are_named_entries_with_a_role" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "ann:admin:ann-secret-ann-secret-ann-secret-ann-"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
    }
  }

  expect_failures = [var.secrets]
}

run "operators_need_one_who_may_write" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "vic:viewer:vic-secret-vic-secret-vic-secret-vic-"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
    }
  }

  expect_failures = [var.secrets]
}

# --- Schedulers: a credential of their own, which runs the jobs and nothing else ---------------

run "the_scheduler_token_is_an_entry_of_its_own" {
  command = plan

  variables {
    scheduler_token = "sched-token-sched-token-sched-token-00"
  }

  assert {
    condition     = output.spin_variables.operators == "${var.secrets.operators},scheduler:scheduler:sched-token-sched-token-sched-token-00" && output.environment["SPIN_VARIABLE_OPERATORS"] == output.spin_variables.operators
    error_message = "scheduler_token is one more operators entry, name scheduler, role scheduler, after the people's"
  }
  assert {
    condition     = output.scheduler_token == var.scheduler_token && issensitive(output.scheduler_token)
    error_message = "the token a scheduler sends is an output of its own, sensitive"
  }
}

run "without_a_scheduler_token_the_operators_are_as_given" {
  command = plan

  assert {
    condition     = output.spin_variables.operators == var.secrets.operators && output.scheduler_token == null
    error_message = "no scheduler_token: no scheduler entry"
  }
}

run "a_short_scheduler_token_is_refused" {
  command = plan

  variables {
    scheduler_token = "sched-token-too-short"
  }

  expect_failures = [var.scheduler_token]
}

run "a_scheduler_token_that_breaks_the_list_is_refused" {
  command = plan

  variables {
    scheduler_token = "sched-token-sched-token-sched-token-00,ann:operator:x"
  }

  expect_failures = [var.scheduler_token]
}

run "operators_may_name_schedulers" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "ann:operator:ann-secret-ann-secret-ann-secret-ann-,cron:scheduler:cron-secret-cron-secret-cron-secret-"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
    }
  }

  assert {
    condition     = output.spin_variables.operators == var.secrets.operators
    error_message = "role scheduler is one of the roles (viewer, operator, scheduler)"
  }
}

run "a_scheduler_is_no_operator" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "cron:scheduler:cron-secret-cron-secret-cron-secret-"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
    }
  }

  expect_failures = [var.secrets]
}

run "one_password_per_node" {
  command = plan

  variables {
    redis_endpoints = [
      { host = "a.upstash.io", port = 6379 },
      { host = "b.upstash.io", port = 6379 },
    ]
    redis_host_pattern = "*.upstash.io:6379"
    redis_password     = null
    redis_passwords    = ["pw-a", "pw/b"]
  }

  assert {
    condition     = output.spin_variables.redis_url == "rediss://default:pw-a@a.upstash.io:6379,rediss://default:pw%2Fb@b.upstash.io:6379"
    error_message = "each node carries its own password"
  }
  assert {
    condition     = output.hosts == { redis_origin = "rediss://*.upstash.io:6379", pg_host = "db.example.com:5432", payment_api_url = "https://api.stripe.com" }
    error_message = "the hosts output carries what allowed_outbound_hosts uses, in the clear"
  }
  assert {
    condition     = !issensitive(output.hosts) && issensitive(output.spin_variables)
    error_message = "hosts are public, the variables are not"
  }
}

run "a_password_for_every_node" {
  command = plan

  variables {
    redis_endpoints = [
      { host = "a.upstash.io", port = 6379 },
      { host = "b.upstash.io", port = 6379 },
    ]
    redis_host_pattern = "*.upstash.io:6379"
    redis_password     = null
    redis_passwords    = ["only-one"]
  }

  expect_failures = [output.spin_variables]
}

run "settings_render_as_one_variable" {
  command = plan

  variables {
    settings = { release_batch = "500", drain_batch = "1000", demo_login = "false" }
  }

  assert {
    condition     = output.settings == "demo_login=false,drain_batch=1000,release_batch=500"
    error_message = "name=value pairs in sorted name order, joined by commas"
  }
  assert {
    condition     = output.settings_variable == tomap({ settings = "demo_login=false,drain_batch=1000,release_batch=500" })
    error_message = "the one Spin variable settings, for a root to pass in the clear"
  }
  assert {
    condition     = output.environment["SPIN_VARIABLE_SETTINGS"] == output.settings && output.spin_variables.settings == output.settings && length(output.environment) == 11
    error_message = "settings is offered with the other variables, as SPIN_VARIABLE_SETTINGS"
  }
  assert {
    condition     = !issensitive(output.settings) && !issensitive(output.settings_variable)
    error_message = "the settings are not secret"
  }
  assert {
    condition     = keys(output.setting_patterns) == ["admission_ipv6_prefix", "demo_login", "drain_batch", "drain_lease_ms", "drain_max_batches", "drain_max_deliveries", "drain_reclaim_idle_ms", "order_events_disable_after_s", "order_events_keep_days", "payment_mode", "release_batch"]
    error_message = "the eleven settings of the app (crates/spin-edge/src/config.rs), trusted_proxies apart"
  }
}

run "every_setting_at_once" {
  command = plan

  variables {
    settings = {
      drain_batch           = "0"
      drain_max_batches     = "1"
      drain_lease_ms        = "60000"
      drain_reclaim_idle_ms = "999999999"
      drain_max_deliveries  = "3"
      release_batch         = "10"
      demo_login            = "true"
      payment_mode          = "live"
      admission_ipv6_prefix = "48"
    }
    demo_environment = true
  }

  assert {
    condition     = output.settings == "admission_ipv6_prefix=48,demo_login=true,drain_batch=0,drain_lease_ms=60000,drain_max_batches=1,drain_max_deliveries=3,drain_reclaim_idle_ms=999999999,payment_mode=live,release_batch=10"
    error_message = "every setting, sorted by name"
  }
}

run "an_unknown_setting_is_refused" {
  command = plan

  variables {
    settings = { drain_bach = "5" }
  }

  expect_failures = [var.settings]
}

run "a_former_variable_that_is_not_a_setting_is_refused" {
  command = plan

  variables {
    settings = { poll_drain_ms = "1000" }
  }

  expect_failures = [var.settings]
}

run "a_negative_number_is_refused" {
  command = plan

  variables {
    settings = { drain_batch = "-1" }
  }

  expect_failures = [var.settings]
}

# --- The demo sign-in: only where the root says it is a demo -----------------------------------

run "demo_login_is_refused_outside_a_demo_environment" {
  command = plan

  variables {
    settings = { demo_login = "true" }
  }

  expect_failures = [var.settings]
}

run "demo_login_in_a_demo_environment" {
  command = plan

  variables {
    demo_environment = true
    settings         = { demo_login = "true" }
  }

  assert {
    condition     = output.settings == "demo_login=true" && output.setting_patterns["demo_login"] == "^(true|false)$"
    error_message = "demo_environment = true lets demo_login be true"
  }
}

run "demo_login_off_anywhere" {
  command = plan

  variables {
    settings = { demo_login = "false" }
  }

  assert {
    condition     = output.settings == "demo_login=false" && output.setting_patterns["demo_login"] == "^false$"
    error_message = "outside a demo environment demo_login may be given, as false only"
  }
}

run "demo_login_is_true_or_false" {
  command = plan

  variables {
    settings = { demo_login = "yes" }
  }

  expect_failures = [var.settings]
}

run "admission_ipv6_prefix_is_1_to_128" {
  command = plan

  variables {
    settings = { admission_ipv6_prefix = "129" }
  }

  expect_failures = [var.settings]
}

run "payment_mode_is_test_or_live" {
  command = plan

  variables {
    settings = { payment_mode = "production" }
  }

  expect_failures = [var.settings]
}

run "trusted_proxies_join_the_settings" {
  command = plan

  variables {
    settings        = { drain_batch = "1000" }
    trusted_proxies = ["10.40.0.0/24", "fd00::/8"]
  }

  assert {
    condition     = output.settings == "drain_batch=1000,trusted_proxies=10.40.0.0/24 fd00::/8"
    error_message = "trusted_proxies is one more pair of settings, its ranges separated by spaces (crates/spin-edge/src/config.rs)"
  }
  assert {
    condition     = output.spin_variables.settings == output.settings
    error_message = "the one Spin variable settings carries them"
  }
}

run "trusted_proxies_alone_set_the_variable" {
  command = plan

  variables {
    trusted_proxies = ["10.42.0.0/16"]
  }

  assert {
    condition     = output.settings_variable == tomap({ settings = "trusted_proxies=10.42.0.0/16" })
    error_message = "with no other setting, trusted_proxies still sets the variable"
  }
}

run "a_trusted_proxy_that_is_not_a_range_is_refused" {
  command = plan

  variables {
    trusted_proxies = ["10.40.0.0/24", "10.40.0.0/33", "lb.internal"]
  }

  expect_failures = [var.trusted_proxies]
}

run "trusted_proxies_is_not_a_setting" {
  command = plan

  variables {
    settings = { trusted_proxies = "10.0.0.0/8" }
  }

  expect_failures = [var.settings]
}

run "the_providers_api_key_travels_as_a_secret" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "ann:operator:ann-secret-ann-secret-ann-secret-ann-"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
      payment_api_key         = "rk_test_0123456789abcdefABCDEF0123456789"
    }
  }

  assert {
    condition     = output.spin_variables.payment_api_key == "rk_test_0123456789abcdefABCDEF0123456789" && output.environment["SPIN_VARIABLE_PAYMENT_API_KEY"] == "rk_test_0123456789abcdefABCDEF0123456789"
    error_message = "payment_api_key reaches the app as SPIN_VARIABLE_PAYMENT_API_KEY"
  }
  assert {
    condition     = issensitive(output.spin_variables) && issensitive(output.environment) && !contains(keys(output.hosts), "payment_api_key")
    error_message = "the key is only in the sensitive outputs, never with the hosts"
  }
}

run "a_live_key_in_live_mode" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "ann:operator:ann-secret-ann-secret-ann-secret-ann-"
      payment_webhook_secrets = "whsec_live-webhook-secret-live-webhook-0"
      payment_api_key         = "rk_live_0123456789abcdefABCDEF0123456789"
    }
    settings = { payment_mode = "live" }
  }

  assert {
    condition     = output.spin_variables.payment_api_key == "rk_live_0123456789abcdefABCDEF0123456789" && output.settings == "payment_mode=live"
    error_message = "a live key with payment_mode = live"
  }
}

run "a_live_key_in_test_mode_is_refused" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "ann:operator:ann-secret-ann-secret-ann-secret-ann-"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
      payment_api_key         = "rk_live_0123456789abcdefABCDEF0123456789"
    }
  }

  expect_failures = [var.secrets]
}

run "a_full_secret_key_is_refused" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "jwt-secret-jwt-secret-jwt-secret-00"
      admission_secret        = "admission-secret-admission-secret-0"
      operators               = "ann:operator:ann-secret-ann-secret-ann-secret-ann-"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
      payment_api_key         = "sk_test_0123456789abcdefABCDEF0123456789"
    }
  }

  expect_failures = [var.secrets]
}

run "another_api_origin" {
  command = plan

  variables {
    payment_api_url = "https://payments-gw.example.com:8443"
  }

  assert {
    condition     = output.spin_variables.payment_api_url == "https://payments-gw.example.com:8443" && output.hosts.payment_api_url == "https://payments-gw.example.com:8443"
    error_message = "payment_api_url is passed as given"
  }
  assert {
    condition     = output.allowed_outbound_hosts[2] == "https://payments-gw.example.com:8443"
    error_message = "\"{{ payment_api_url }}\" resolves to the origin given"
  }
}

run "an_api_url_with_a_path_is_refused" {
  command = plan

  variables {
    payment_api_url = "https://api.stripe.com/v1"
  }

  expect_failures = [var.payment_api_url]
}

run "an_api_url_with_a_trailing_slash_is_refused" {
  command = plan

  variables {
    payment_api_url = "https://api.stripe.com/"
  }

  expect_failures = [var.payment_api_url]
}

run "an_api_url_over_plain_http_is_refused" {
  command = plan

  variables {
    payment_api_url = "http://api.stripe.com"
  }

  expect_failures = [var.payment_api_url]
}

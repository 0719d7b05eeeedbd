# Offline: the aws provider is mocked (its binary still comes from the local mirror, for the
# schema). `command = apply` on a mock provider creates nothing; it fills computed attributes
# with the defaults below (or random strings), so endpoints and ARNs are known to the asserts.

mock_provider "aws" {
  mock_resource "aws_memorydb_cluster" {
    defaults = {
      arn              = "arn:aws:memorydb:us-east-1:123456789012:cluster/seckill-redis-0"
      cluster_endpoint = [{ address = "clustercfg.seckill-redis-0.abc123.memorydb.us-east-1.amazonaws.com", port = 6379 }]
    }
  }
  mock_resource "aws_elasticache_replication_group" {
    defaults = {
      arn                      = "arn:aws:elasticache:us-east-1:123456789012:replicationgroup:seckill-redis-0"
      primary_endpoint_address = "master.seckill-redis-0.abc123.use1.cache.amazonaws.com"
    }
  }
  mock_resource "aws_db_instance" {
    defaults = {
      address = "seckill-postgres.abc123.us-east-1.rds.amazonaws.com"
      arn     = "arn:aws:rds:us-east-1:123456789012:db:seckill-postgres"
    }
  }
  mock_resource "aws_lb" {
    defaults = {
      arn      = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/seckill-app/0123456789abcdef"
      dns_name = "seckill-app-123456789.us-east-1.elb.amazonaws.com"
    }
  }
  mock_resource "aws_lb_target_group" {
    defaults = {
      arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/sk-app/0123456789abcdef"
    }
  }
  # Two target groups, two ARNs: the tests tell which group a listener rule forwards to.
  override_resource {
    target = aws_lb_target_group.critical
    values = { arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/skc-critical/fedcba9876543210" }
  }
  # Two listeners, two ARNs: the tests tell which one a listener rule sits on.
  override_resource {
    target = aws_lb_listener.http
    values = { arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:listener/app/seckill-app/0123456789abcdef/0000000000000080" }
  }
  override_resource {
    target = aws_lb_listener.https
    values = { arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:listener/app/seckill-app/0123456789abcdef/0000000000000443" }
  }
  mock_resource "aws_secretsmanager_secret" {
    defaults = {
      arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:seckill/spin/secret-AbCdEf"
    }
  }
  mock_resource "aws_iam_role" {
    defaults = {
      arn = "arn:aws:iam::123456789012:role/seckill-app"
    }
  }
  mock_resource "aws_iam_instance_profile" {
    defaults = {
      arn = "arn:aws:iam::123456789012:instance-profile/seckill-app"
    }
  }
  mock_resource "aws_launch_template" {
    defaults = {
      id             = "lt-0123456789abcdef0"
      latest_version = 1
    }
  }
}

variables {
  region              = "us-east-1"
  ami_id              = "ami-0123456789abcdef0"
  app_artifact_url    = "https://artifacts.example.com/seckill/seckill-0.1.0.tar.gz"
  app_artifact_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
  spin_sha256         = "1111111111111111111111111111111111111111111111111111111111111111"

  redis_password        = "test-redis-password-0123456789"
  postgres_password     = "test-postgres-password-0123"
  postgres_app_password = "test-app-password-0123456"
  # The load balancer alone, over plain HTTP (the runs below that test CloudFront or HTTPS say so).
  cdn              = false
  allow_plain_http = true
  secrets = {
    jwt_secret              = "test-jwt-secret-test-jwt-secret-0000"
    admission_secret        = "test-admission-secret-test-admission"
    operators               = "ops:operator:test-operator-secret-test-operator-00"
    payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
    payment_api_key         = "rk_test_0123456789abcdefABCDEF0123456789"
  }
}

run "memorydb_by_default" {
  command = apply

  assert {
    condition     = length(aws_memorydb_cluster.redis) == 1 && length(aws_elasticache_replication_group.redis) == 0
    error_message = "MemoryDB (the durable transaction log) is the default Redis"
  }
  assert {
    condition     = aws_memorydb_cluster.redis[0].tls_enabled == true
    error_message = "MemoryDB with TLS"
  }
  assert {
    condition     = aws_memorydb_cluster.redis[0].num_shards == 1 && aws_memorydb_cluster.redis[0].num_replicas_per_shard == 0
    error_message = "one shard per node (Spin does not follow MOVED), no replica the endpoint could hand out"
  }
  assert {
    condition     = aws_memorydb_user.app[0].authentication_mode[0].type == "password" && aws_memorydb_user.app[0].user_name == "seckill-app"
    error_message = "the app's own ACL user, with a password"
  }
  assert {
    condition     = startswith(aws_secretsmanager_secret_version.spin["redis_url"].secret_string, "rediss://seckill-app:test-redis-password-0123456789@clustercfg.seckill-redis-0.abc123.memorydb.us-east-1.amazonaws.com:6379")
    error_message = "SPIN_VARIABLE_REDIS_URL: rediss://, the ACL user, the cluster endpoint with its port"
  }
  assert {
    condition     = aws_secretsmanager_secret_version.spin["pg_url"].secret_string == "postgres://seckill_app:test-app-password-0123456@seckill-postgres.abc123.us-east-1.rds.amazonaws.com:5432/seckill?sslmode=require"
    error_message = "SPIN_VARIABLE_PG_URL: the RDS address, sslmode=require"
  }
  assert {
    condition     = output.spin_variables == { redis_origin = "rediss://clustercfg.seckill-redis-0.abc123.memorydb.us-east-1.amazonaws.com:6379", pg_host = "seckill-postgres.abc123.us-east-1.rds.amazonaws.com:5432", payment_api_url = "https://api.stripe.com", settings = "trusted_proxies=10.40.0.0/24 10.40.1.0/24" }
    error_message = "redis_origin (redis_url's scheme, rediss://) and pg_host name the same endpoints as the URLs, with explicit ports (rediss:// has no default port); payment_api_url is Stripe's by default; settings trusts the load balancer's subnets"
  }
  assert {
    condition     = output.allowed_outbound_hosts == ["rediss://clustercfg.seckill-redis-0.abc123.memorydb.us-east-1.amazonaws.com:6379", "postgres://seckill-postgres.abc123.us-east-1.rds.amazonaws.com:5432", "https://api.stripe.com"]
    error_message = "the hosts spin.toml lets the functions reach: one Redis entry, then Postgres, then the payment provider's API"
  }
  assert {
    condition     = output.spin_environment["SPIN_VARIABLE_REDIS_ORIGIN"] == output.spin_variables.redis_origin && startswith(output.spin_environment["SPIN_VARIABLE_REDIS_URL"], "rediss://") && !contains(keys(output.spin_environment), "SPIN_VARIABLE_REDIS_HOST")
    error_message = "SPIN_VARIABLE_* environment offered as an output, SPIN_VARIABLE_REDIS_ORIGIN in place of SPIN_VARIABLE_REDIS_HOST"
  }
  assert {
    condition     = output.redis_engine == "memorydb" && output.manifest == "spin.toml"
    error_message = "outputs name the Redis engine and the manifest (with the cron trigger)"
  }
}

run "postgres_forces_tls_and_stays_private" {
  command = apply

  assert {
    condition     = anytrue([for p in aws_db_parameter_group.postgres.parameter : p.name == "rds.force_ssl" && p.value == "1"])
    error_message = "the parameter group sets rds.force_ssl = 1"
  }
  assert {
    condition     = aws_db_instance.postgres.parameter_group_name == aws_db_parameter_group.postgres.name
    error_message = "the instance uses that parameter group"
  }
  assert {
    condition     = aws_db_parameter_group.postgres.family == "postgres16"
    error_message = "the family follows the engine version"
  }
  assert {
    condition     = aws_db_instance.postgres.storage_encrypted && !aws_db_instance.postgres.publicly_accessible && aws_db_instance.postgres.multi_az
    error_message = "encrypted, private, Multi-AZ"
  }
  assert {
    condition     = aws_db_instance.postgres.deletion_protection && !aws_db_instance.postgres.skip_final_snapshot
    error_message = "deletion protection and a final snapshot by default"
  }
  assert {
    condition     = alltrue([for s in aws_db_subnet_group.postgres.subnet_ids : contains([for p in aws_subnet.private : p.id], s)])
    error_message = "Postgres lives in the private subnets"
  }
}

run "only_the_listener_is_open_to_the_world" {
  command = apply

  assert {
    condition = alltrue([
      for k, r in aws_vpc_security_group_ingress_rule.this :
      r.cidr_ipv4 == null || (r.security_group_id == aws_security_group.lb.id && contains([80, 443], r.from_port) && r.from_port == r.to_port)
    ])
    error_message = "no ingress from an address range except to the load balancer's listener ports"
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.this["redis-from-app"].referenced_security_group_id == aws_security_group.app.id && aws_vpc_security_group_ingress_rule.this["redis-from-app"].from_port == 6379
    error_message = "Redis accepts the app's group on the Redis port"
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.this["postgres-from-app"].referenced_security_group_id == aws_security_group.app.id && aws_vpc_security_group_ingress_rule.this["postgres-from-app"].from_port == 5432
    error_message = "Postgres accepts the app's group on 5432"
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.this["app-from-lb"].referenced_security_group_id == aws_security_group.lb.id && aws_vpc_security_group_ingress_rule.this["app-from-lb"].from_port == 3000
    error_message = "the app accepts the load balancer on the app port"
  }
  assert {
    condition     = length([for k, r in aws_vpc_security_group_ingress_rule.this : k if r.cidr_ipv4 != null]) == 1
    error_message = "without a certificate, only port 80 is open"
  }
  assert {
    condition     = length(aws_lb_listener.https) == 0 && aws_lb_listener.http.default_action[0].type == "fixed-response" && length(aws_lb_listener_rule.known_paths) > 0 && alltrue([for r in aws_lb_listener_rule.known_paths : r.listener_arn == aws_lb_listener.http.arn])
    error_message = "without a certificate, HTTP serves the app: its rules forward the routes (its default refuses the rest)"
  }
  assert {
    condition     = alltrue([for s in aws_autoscaling_group.app.vpc_zone_identifier : contains([for p in aws_subnet.private : p.id], s)])
    error_message = "the instances live in the private subnets"
  }
}

run "https_with_a_certificate" {
  command = apply

  variables {
    certificate_arn = "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"
  }

  assert {
    condition     = length(aws_lb_listener.https) == 1 && aws_lb_listener.https[0].port == 443 && aws_lb_listener.https[0].protocol == "HTTPS"
    error_message = "an HTTPS listener with the certificate"
  }
  assert {
    condition     = aws_lb_listener.http.default_action[0].type == "redirect" && aws_lb_listener.http.default_action[0].redirect[0].protocol == "HTTPS"
    error_message = "HTTP redirects to HTTPS"
  }
  assert {
    condition     = startswith(output.app_url, "https://")
    error_message = "the app URL is https"
  }
  assert {
    condition     = length([for k, r in aws_vpc_security_group_ingress_rule.this : k if r.cidr_ipv4 != null]) == 2
    error_message = "80 (redirect) and 443"
  }
}

run "instances_boot_spin_with_cron_and_no_secret_in_user_data" {
  command = apply

  assert {
    condition = alltrue([
      for s in [var.secrets.jwt_secret, var.secrets.admission_secret, var.secrets.operators, var.secrets.payment_webhook_secrets, var.secrets.payment_api_key, var.redis_password, var.postgres_password, var.postgres_app_password] :
      !strcontains(base64decode(aws_launch_template.app.user_data), s)
    ])
    error_message = "no secret in user_data"
  }
  assert {
    condition = alltrue([
      for s in ["spin up -f spin.toml", "trigger-cron.json", "pg_advisory_lock", "update-ca-trust", "secretsmanager get-secret-value", "SPIN_VARIABLE_REDIS_ORIGIN=\"rediss://clustercfg.seckill-redis-0.abc123.memorydb.us-east-1.amazonaws.com:6379\"", "https://truststore.pki.rds.amazonaws.com/us-east-1/us-east-1-bundle.pem"] :
      strcontains(base64decode(aws_launch_template.app.user_data), s)
    ])
    error_message = "user_data installs the cron plugin and the RDS CA, reads secrets, migrates under a lock, runs spin.toml"
  }
  assert {
    condition     = aws_launch_template.app.metadata_options[0].http_tokens == "required"
    error_message = "IMDSv2 only"
  }
  assert {
    condition     = jsondecode(aws_iam_role_policy.app.policy).Statement[0].Action == ["secretsmanager:GetSecretValue"] && length(jsondecode(aws_iam_role_policy.app.policy).Statement[0].Resource) == 9
    error_message = "the instances may read the seven secret variables and the migration's two secrets, and nothing else"
  }
  assert {
    condition     = length(jsondecode(aws_iam_role_policy.app.policy).Statement) == 1
    error_message = "no S3 permission for an https artifact"
  }
}

# --- The runtime: "spin" (default) or "seckill-host" ------------------------------------------

run "default_runtime_is_spin_with_the_same_user_data_as_before" {
  command = apply

  # The default runtime's user_data, byte for byte (sha256 of the rendered text with this file's
  # variables and mocks): choosing no runtime changes nothing on running instances, no new
  # launch template version, no refresh. When boot.sh.tftpl's Spin path, a file it ships or the
  # variables it carries change on purpose, put the new hash here.
  assert {
    condition     = sha256(local.user_data) == "4de01232bfe10549928d699e3d244778b9cb44209e222fcbff7424b0a573283b"
    error_message = "runtime = \"spin\" no longer renders the user_data of before (sha256 ${sha256(local.user_data)}, ${length(local.user_data)} bytes)"
  }
  assert {
    condition = alltrue([
      for s in ["SECKILL_SPIN_URL=", "spin plugins install --yes --file /tmp/trigger-cron.json", "cat >/etc/seckill/spin-runtime-config", "exec spin up -f spin.toml", "systemctl enable --now seckill.service"] :
      strcontains(base64decode(aws_launch_template.app.user_data), s)
    ])
    error_message = "the default installs Spin and the cron plugin and runs spin up under seckill.service"
  }
  assert {
    condition     = !strcontains(base64decode(aws_launch_template.app.user_data), "seckill-host")
    error_message = "no seckill-host unit, binary or prestart in the default user_data"
  }
}

run "seckill_host_runtime" {
  command = apply

  variables {
    runtime          = "seckill-host"
    app_artifact_url = "https://artifacts.example.com/seckill/seckill-0.1.0-x86_64-unknown-linux-gnu.tar.gz"
  }

  assert {
    condition = alltrue([
      for s in [
        "cat >/etc/seckill/seckill-host.service <<'SECKILL_UNIT'",
        "install -m 0644 /etc/seckill/seckill-host.service /etc/systemd/system/seckill-host.service",
        "systemctl enable --now seckill-host.service",
        "ExecStart=/opt/seckill/app/bin/seckill-host --log-format json up \\\n    --manifest /opt/seckill/app/spin.toml",
        "test -x /opt/seckill/app/bin/seckill-host",
      ] : strcontains(base64decode(aws_launch_template.app.user_data), s)
    ])
    error_message = "user_data installs files/seckill-host.service and starts seckill-host on the artifact's spin.toml"
  }
  assert {
    condition = alltrue([
      for l in split("\n", local.shipped.seckill-host-unit) :
      strcontains(base64decode(aws_launch_template.app.user_data), "\n${l}\n") if l != "    --metrics-listen 127.0.0.1:9090"
    ])
    error_message = "the unit installed is files/seckill-host.service line for line (without comments), but for the metrics flag"
  }
  assert {
    condition     = strcontains(base64decode(aws_launch_template.app.user_data), "    --shutdown-grace 30s \\\n    --idle-timeout 105s\nKillSignal=SIGTERM")
    error_message = "ExecStart ends with an idle timeout above the ALB's 90 s, and without --metrics-listen by default"
  }
  assert {
    condition = alltrue([
      for s in [
        # The variables: non-secret ones in boot.env (the unit's EnvironmentFile=), the secrets
        # fetched from Secrets Manager at each start into the file the drop-in adds.
        "\nSPIN_VARIABLE_REDIS_ORIGIN=\"rediss://clustercfg.seckill-redis-0.abc123.memorydb.us-east-1.amazonaws.com:6379\"\n",
        "\nSPIN_VARIABLE_PG_HOST=\"seckill-postgres.abc123.us-east-1.rds.amazonaws.com:5432\"\n",
        "\nSPIN_VARIABLE_PAYMENT_API_URL=\"https://api.stripe.com\"\n",
        "\nSECKILL_APP_PORT=\"3000\"\n",
        "SECKILL_SECRET_ARNS=\"redis_url=arn:aws:secretsmanager:",
        "EnvironmentFile=-/etc/seckill/boot.env",
        "EnvironmentFile=-/run/seckill/secrets.env",
        "ExecStartPre=/opt/seckill/bin/host-prestart",
        "RuntimeDirectory=seckill",
        "secretsmanager get-secret-value",
        "printf 'SPIN_VARIABLE_%s=\"%s\"\\n' \"$${name^^}\" \"$value\" >>\"$tmp\"",
        "/opt/seckill/bin/migrate-locked /opt/seckill/app/migrations",
        "pg_advisory_lock",
        "update-ca-trust",
      ] : strcontains(base64decode(aws_launch_template.app.user_data), s)
    ])
    error_message = "the host gets the variables as Spin does (boot.env, secrets from Secrets Manager at start) and migrates first"
  }
  assert {
    condition = alltrue([
      for s in ["spin up", "spin plugins", "trigger-cron", "SECKILL_SPIN_URL", "spin-runtime-config", "variables_provider", "seckill.service", "--metrics-listen"] :
      !strcontains(base64decode(aws_launch_template.app.user_data), s)
    ])
    error_message = "no Spin, no cron plugin, no Spin runtime config (the host resolves variables once at start), no metrics unless asked"
  }
  assert {
    condition = alltrue([
      for s in [var.secrets.jwt_secret, var.secrets.admission_secret, var.secrets.operators, var.secrets.payment_webhook_secrets, var.secrets.payment_api_key, var.redis_password, var.postgres_password, var.postgres_app_password] :
      !strcontains(base64decode(aws_launch_template.app.user_data), s)
    ])
    error_message = "no secret in user_data"
  }
  assert {
    condition     = length([for k, r in aws_vpc_security_group_ingress_rule.this : k if r.cidr_ipv4 != null]) == 1 && length(jsondecode(aws_iam_role_policy.app.policy).Statement[0].Resource) == 9
    error_message = "the same network and permissions as under Spin: no metrics port open, the nine secrets readable"
  }
}

run "seckill_host_metrics" {
  command = apply

  variables {
    runtime               = "seckill-host"
    metrics_listen        = "0.0.0.0:9100"
    metrics_ingress_cidrs = ["10.50.0.0/16"]
  }

  assert {
    condition     = strcontains(base64decode(aws_launch_template.app.user_data), "    --idle-timeout 105s \\\n    --metrics-listen 0.0.0.0:9100\nKillSignal=SIGTERM")
    error_message = "--metrics-listen metrics_listen"
  }
  assert {
    condition = (
      aws_vpc_security_group_ingress_rule.this["app-metrics-10.50.0.0/16"].security_group_id == aws_security_group.app.id &&
      aws_vpc_security_group_ingress_rule.this["app-metrics-10.50.0.0/16"].from_port == 9100 &&
      aws_vpc_security_group_ingress_rule.this["app-metrics-10.50.0.0/16"].to_port == 9100 &&
      aws_vpc_security_group_ingress_rule.this["app-metrics-10.50.0.0/16"].cidr_ipv4 == "10.50.0.0/16"
    )
    error_message = "the metrics port, open to metrics_ingress_cidrs only"
  }
  assert {
    condition     = length([for k, r in aws_vpc_security_group_ingress_rule.this : k if r.cidr_ipv4 != null]) == 2
    error_message = "the listener and the metrics port: nothing else from an address range"
  }
}

run "seckill_host_metrics_without_a_rule" {
  command = plan

  variables {
    runtime        = "seckill-host"
    metrics_listen = "127.0.0.1:9090"
  }

  assert {
    condition     = length([for k, r in aws_vpc_security_group_ingress_rule.this : k if startswith(k, "app-metrics-")]) == 0 && local.metrics_port == 9090
    error_message = "metrics for an agent on the instance: no ingress rule"
  }
}

run "operator_paths_open_to_the_token_alone_by_default" {
  command = plan

  assert {
    condition     = length(aws_lb_listener_rule.operators_allowed) == 0 && length(aws_lb_listener_rule.operators_only) == 0
    error_message = "no operator_cidrs: no listener rule, the tokens alone guard /admin/* and /console"
  }
}

run "operator_cidrs_restrict_admin_and_console" {
  command = apply

  variables {
    certificate_arn = "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"
    operator_cidrs  = ["198.51.100.0/24", "203.0.113.7/32", "192.0.2.0/28", "2001:db8::/48"]
  }

  assert {
    condition     = length(aws_lb_listener_rule.operators_allowed) == 2 * length(local.lb_path_chunks.operators) && length(aws_lb_listener_rule.operators_only) == 1
    error_message = "four ranges: two groups of up to 3 addresses, each with every chunk of the operators' routes' patterns, then the refusal"
  }
  assert {
    condition = alltrue(flatten([
      for p in local.lb_operator_paths : [
        for cidr in var.operator_cidrs : anytrue([
          for r in aws_lb_listener_rule.operators_allowed :
          contains(flatten([for c in r.condition : c.path_pattern[0].values if length(c.path_pattern) > 0]), p) &&
          contains(flatten([for c in r.condition : c.source_ip[0].values if length(c.source_ip) > 0]), cidr)
        ])
      ]
    ])) && toset(local.lb_operator_paths) == toset([for p in flatten(values(module.request_classes.alb_path_patterns)) : p if startswith(p, "/admin/") || startswith(p, "/console")])
    error_message = "every pattern of the operators' routes is forwarded from every operator range, and nothing else under /admin/ or /console"
  }
  assert {
    condition = alltrue([
      for r in concat(aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only) : r.listener_arn == aws_lb_listener.https[0].arn
    ])
    error_message = "the rules sit on the HTTPS listener (HTTP only redirects)"
  }
  assert {
    condition = alltrue([
      for r in aws_lb_listener_rule.operators_allowed :
      r.action[0].type == "forward" && r.action[0].target_group_arn == aws_lb_target_group.app.arn &&
      r.priority < aws_lb_listener_rule.operators_only[0].priority &&
      length(one([for c in r.condition : c.path_pattern[0].values if length(c.path_pattern) > 0])) +
      length(one([for c in r.condition : c.source_ip[0].values if length(c.source_ip) > 0])) <= 5
    ])
    error_message = "operators' addresses are forwarded first, each rule within ALB's 5 condition values"
  }
  assert {
    condition = toset(flatten([
      for r in aws_lb_listener_rule.operators_allowed : [for c in r.condition : c.source_ip[0].values if length(c.source_ip) > 0]
    ])) == toset(var.operator_cidrs)
    error_message = "every operator range is forwarded"
  }
  assert {
    condition = (
      aws_lb_listener_rule.operators_only[0].action[0].type == "fixed-response" &&
      aws_lb_listener_rule.operators_only[0].action[0].fixed_response[0].status_code == "403" &&
      jsondecode(aws_lb_listener_rule.operators_only[0].action[0].fixed_response[0].message_body).error.code == "forbidden" &&
      toset(one([for c in aws_lb_listener_rule.operators_only[0].condition : c.path_pattern[0].values if length(c.path_pattern) > 0])) == toset(["/admin/*", "/console*"])
    )
    error_message = "any other address gets the API's 403 JSON error on /admin/* and /console"
  }
}

run "operator_cidrs_without_https_sit_on_the_http_listener" {
  command = apply

  variables {
    operator_cidrs = ["198.51.100.0/24"]
  }

  assert {
    condition     = aws_lb_listener_rule.operators_only[0].listener_arn == aws_lb_listener.http.arn && aws_lb_listener_rule.operators_allowed[0].listener_arn == aws_lb_listener.http.arn
    error_message = "without a certificate, the rules sit on the HTTP listener, which forwards"
  }
}

run "rejects_operator_cidrs_that_are_not_ranges" {
  command = plan
  variables {
    operator_cidrs = ["office"]
  }
  expect_failures = [var.operator_cidrs]
}

run "rejects_an_unknown_runtime" {
  command = plan
  variables {
    runtime = "wasmtime"
  }
  expect_failures = [var.runtime]
}

run "rejects_metrics_under_spin" {
  command = plan
  variables {
    metrics_listen = "0.0.0.0:9090"
  }
  expect_failures = [var.metrics_listen]
}

run "rejects_a_metrics_address_that_is_not_ip_port" {
  command = plan
  variables {
    runtime        = "seckill-host"
    metrics_listen = "metrics.internal:9090"
  }
  expect_failures = [var.metrics_listen]
}

run "rejects_metrics_cidrs_without_metrics" {
  command = plan
  variables {
    runtime               = "seckill-host"
    metrics_ingress_cidrs = ["10.50.0.0/16"]
  }
  expect_failures = [var.metrics_ingress_cidrs]
}

run "settings_reach_the_instances_as_one_variable" {
  command = apply

  variables {
    settings = { release_batch = "500", drain_batch = "1000", demo_login = "false" }
  }

  assert {
    condition     = output.spin_variables.settings == "demo_login=false,drain_batch=1000,release_batch=500,trusted_proxies=10.40.0.0/24 10.40.1.0/24"
    error_message = "the settings are one Spin variable: name=value pairs in name order, joined by commas"
  }
  assert {
    condition     = strcontains(base64decode(aws_launch_template.app.user_data), "\nSPIN_VARIABLE_SETTINGS=\"demo_login=false,drain_batch=1000,release_batch=500,trusted_proxies=10.40.0.0/24 10.40.1.0/24\"\n")
    error_message = "settings reaches the service's environment file (and so the runtime config) in the clear, like redis_origin and pg_host"
  }
  assert {
    condition     = output.spin_environment["SPIN_VARIABLE_SETTINGS"] == output.spin_variables.settings
    error_message = "settings is in the SPIN_VARIABLE_* output"
  }
  assert {
    condition     = toset(keys(aws_secretsmanager_secret.spin)) == toset(["redis_url", "pg_url", "jwt_secret", "admission_secret", "operators", "payment_webhook_secrets", "payment_api_key"])
    error_message = "settings is not a secret"
  }
}

run "the_load_balancer_is_the_trusted_proxy" {
  command = plan

  assert {
    condition     = output.spin_variables.settings == "trusted_proxies=10.40.0.0/24 10.40.1.0/24" && strcontains(base64decode(aws_launch_template.app.user_data), "\nSPIN_VARIABLE_SETTINGS=\"trusted_proxies=10.40.0.0/24 10.40.1.0/24\"\n")
    error_message = "with no setting given, settings holds only the trusted proxies: the public subnets, where the load balancer's nodes are"
  }
  assert {
    condition     = aws_lb.app.xff_header_processing_mode == "append"
    error_message = "the load balancer appends the client's address to X-Forwarded-For, where the app reads it"
  }
}

run "the_trusted_proxies_follow_the_public_subnets" {
  command = plan

  variables {
    vpc_cidr            = "10.60.0.0/16"
    public_subnet_cidrs = ["10.60.250.0/24", "10.60.251.0/24"]
  }

  assert {
    condition     = output.spin_variables.settings == "trusted_proxies=10.60.250.0/24 10.60.251.0/24"
    error_message = "the trusted proxies are the subnets the load balancer is in"
  }
}

run "spin_settings_that_do_not_waste_cpu" {
  command = apply

  assert {
    condition = alltrue([
      for s in ["--log-dir \"\"", "--runtime-config-file \"$config\"", "/opt/seckill/bin/spin-runtime-config /opt/seckill/app/spin.toml", "[[variables_provider]]", "type = \\\"static\\\"", "RuntimeDirectoryMode=0700", "umask 077"] :
      strcontains(base64decode(aws_launch_template.app.user_data), s)
    ])
    error_message = "spin up logs to the journal and reads every variable from a static provider written at start (0600, tmpfs)"
  }
  assert {
    condition     = strcontains(base64decode(aws_launch_template.app.user_data), "UnsetEnvironment=RUST_BACKTRACE") && strcontains(base64decode(aws_launch_template.app.user_data), "RUST_LIB_BACKTRACE=0")
    error_message = "no backtrace captured per request: RUST_BACKTRACE unset, RUST_LIB_BACKTRACE=0"
  }
  assert {
    condition     = length(regexall("RUST_BACKTRACE=[^0]", base64decode(aws_launch_template.app.user_data))) == 0
    error_message = "RUST_BACKTRACE is never set"
  }
}

run "artifact_on_s3" {
  command = plan

  variables {
    app_artifact_url = "s3://seckill-artifacts/releases/seckill-0.1.0.tar.gz"
  }

  assert {
    condition     = local.artifact_arn == "arn:aws:s3:::seckill-artifacts/releases/seckill-0.1.0.tar.gz"
    error_message = "the instances may read that one object"
  }
}

run "secrets_are_sensitive" {
  command = apply

  assert {
    condition     = issensitive(output.spin_environment)
    error_message = "the SPIN_VARIABLE_* environment output is sensitive"
  }
  assert {
    condition     = alltrue([for k, v in aws_secretsmanager_secret_version.spin : issensitive(v.secret_string)])
    error_message = "every secret value is sensitive"
  }
  assert {
    condition     = issensitive(var.redis_password) && issensitive(var.postgres_password) && issensitive(var.secrets)
    error_message = "password and secret inputs are sensitive"
  }
  assert {
    condition     = !issensitive(output.spin_variables) && !issensitive(output.app_url)
    error_message = "the non-secret outputs stay readable"
  }
  assert {
    condition     = toset(keys(aws_secretsmanager_secret.spin)) == toset(["redis_url", "pg_url", "jwt_secret", "admission_secret", "operators", "payment_webhook_secrets", "payment_api_key"])
    error_message = "every variable spin.toml marks secret goes to Secrets Manager (job_key apart: no scheduler here needs it)"
  }
}

# --- The payment provider's API -------------------------------------------------------------

run "the_providers_api_reaches_the_instances" {
  command = apply

  assert {
    condition     = aws_secretsmanager_secret_version.spin["payment_api_key"].secret_string == var.secrets.payment_api_key && aws_secretsmanager_secret.spin["payment_api_key"].name == "seckill/spin/payment_api_key"
    error_message = "the API key is a Secrets Manager secret like the other secret variables"
  }
  assert {
    condition     = strcontains(base64decode(aws_launch_template.app.user_data), " payment_api_key=arn:aws:secretsmanager:") && strcontains(base64decode(aws_launch_template.app.user_data), "\nSPIN_VARIABLE_PAYMENT_API_URL=\"https://api.stripe.com\"\n")
    error_message = "the instances read the key from Secrets Manager at start, and get the API's origin in the clear in boot.env"
  }
  assert {
    condition     = !issensitive(output.spin_variables.payment_api_url) && output.spin_environment["SPIN_VARIABLE_PAYMENT_API_KEY"] == var.secrets.payment_api_key
    error_message = "the origin is public, the key only in the sensitive environment output"
  }
  assert {
    condition     = contains([for r in aws_vpc_security_group_egress_rule.this : r.from_port if r.security_group_id == aws_security_group.app.id && r.cidr_ipv4 == "0.0.0.0/0"], 443)
    error_message = "the instances may open HTTPS to the provider's API"
  }
}

run "without_an_api_key_no_secret_holds_it" {
  command = apply

  variables {
    secrets = {
      jwt_secret              = "test-jwt-secret-test-jwt-secret-0000"
      admission_secret        = "test-admission-secret-test-admission"
      operators               = "ops:operator:test-operator-secret-test-operator-00"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
    }
  }

  assert {
    condition     = toset(keys(aws_secretsmanager_secret.spin)) == toset(["redis_url", "pg_url", "jwt_secret", "admission_secret", "operators", "payment_webhook_secrets"])
    error_message = "Secrets Manager stores no empty string: an empty payment_api_key gets no secret (spin.toml's default \"\" stays)"
  }
  assert {
    condition     = !strcontains(base64decode(aws_launch_template.app.user_data), "payment_api_key") && length(jsondecode(aws_iam_role_policy.app.policy).Statement[0].Resource) == 8
    error_message = "the instances neither fetch nor may read a key that is not there"
  }
  assert {
    condition     = output.spin_environment["SPIN_VARIABLE_PAYMENT_API_KEY"] == ""
    error_message = "the key is \"\" (the provider's API off)"
  }
}

run "a_live_key_with_payment_mode_live" {
  command = plan

  variables {
    secrets = {
      jwt_secret              = "test-jwt-secret-test-jwt-secret-0000"
      admission_secret        = "test-admission-secret-test-admission"
      operators               = "ops:operator:test-operator-secret-test-operator-00"
      payment_webhook_secrets = "whsec_live-webhook-secret-live-webhook-0"
      payment_api_key         = "rk_live_0123456789abcdefABCDEF0123456789"
    }
    settings = { payment_mode = "live" }
  }

  assert {
    condition     = output.spin_variables.settings == "payment_mode=live,trusted_proxies=10.40.0.0/24 10.40.1.0/24"
    error_message = "payment_mode travels in settings"
  }
}

run "rejects_a_live_key_in_test_mode" {
  command = plan
  variables {
    secrets = {
      jwt_secret              = "test-jwt-secret-test-jwt-secret-0000"
      admission_secret        = "test-admission-secret-test-admission"
      operators               = "ops:operator:test-operator-secret-test-operator-00"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
      payment_api_key         = "rk_live_0123456789abcdefABCDEF0123456789"
    }
  }
  expect_failures = [var.secrets]
}

run "rejects_an_unrestricted_secret_key" {
  command = plan
  variables {
    secrets = {
      jwt_secret              = "test-jwt-secret-test-jwt-secret-0000"
      admission_secret        = "test-admission-secret-test-admission"
      operators               = "ops:operator:test-operator-secret-test-operator-00"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
      payment_api_key         = "sk_test_0123456789abcdefABCDEF0123456789"
    }
  }
  expect_failures = [var.secrets]
}

run "rejects_an_api_url_with_a_path" {
  command = plan
  variables {
    payment_api_url = "https://api.stripe.com/v1"
  }
  expect_failures = [var.payment_api_url]
}

run "rejects_an_api_url_over_plain_http" {
  command = plan
  variables {
    payment_api_url = "http://api.stripe.com"
  }
  expect_failures = [var.payment_api_url]
}

run "rejects_an_api_url_on_a_port_the_instances_cannot_reach" {
  command = plan
  variables {
    payment_api_url = "https://api.stripe.com:8443"
  }
  expect_failures = [var.payment_api_url]
}

run "elasticache_when_asked" {
  command = apply

  variables {
    redis_engine = "elasticache"
  }

  assert {
    condition     = length(aws_elasticache_replication_group.redis) == 1 && length(aws_memorydb_cluster.redis) == 0
    error_message = "ElastiCache replaces MemoryDB"
  }
  assert {
    condition     = aws_elasticache_replication_group.redis[0].transit_encryption_enabled && aws_elasticache_replication_group.redis[0].auth_token == var.redis_password
    error_message = "TLS in transit and an AUTH token"
  }
  assert {
    condition     = aws_elasticache_replication_group.redis[0].cluster_mode == "disabled" && aws_elasticache_replication_group.redis[0].num_cache_clusters == 2 && aws_elasticache_replication_group.redis[0].automatic_failover_enabled
    error_message = "one shard, a replica and automatic failover"
  }
  assert {
    condition     = aws_secretsmanager_secret_version.spin["redis_url"].secret_string == "rediss://default:test-redis-password-0123456789@master.seckill-redis-0.abc123.use1.cache.amazonaws.com:6379"
    error_message = "rediss:// to the primary endpoint as the default user"
  }
}

run "several_redis_nodes" {
  command = apply

  variables {
    redis_nodes = 3
  }

  assert {
    condition     = length(aws_memorydb_cluster.redis) == 3 && alltrue([for c in aws_memorydb_cluster.redis : c.num_shards == 1])
    error_message = "three independent one-shard clusters"
  }
  assert {
    condition     = length(split(",", aws_secretsmanager_secret_version.spin["redis_url"].secret_string)) == 3
    error_message = "redis_url lists every node"
  }
  assert {
    condition     = output.spin_variables.redis_origin == "rediss://*.memorydb.us-east-1.amazonaws.com:6379"
    error_message = "one allowed_outbound_hosts entry covers every node: rediss:// (redis_url's scheme) and a pattern with the port"
  }
}

run "nat_per_zone" {
  command = plan

  variables {
    availability_zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    nat_gateways       = "per_zone"
  }

  assert {
    condition     = length(aws_nat_gateway.main) == 3 && length(aws_subnet.private) == 3
    error_message = "one NAT gateway per zone"
  }
  assert {
    condition     = aws_subnet.private["us-east-1c"].cidr_block == "10.40.160.0/20" && aws_subnet.public["us-east-1c"].cidr_block == "10.40.2.0/24"
    error_message = "ranges carved from vpc_cidr"
  }
}

run "rejects_an_unknown_redis_engine" {
  command = plan
  variables {
    redis_engine = "redis-cluster"
  }
  expect_failures = [var.redis_engine]
}

run "rejects_a_bad_ami" {
  command = plan
  variables {
    ami_id = "ubuntu-latest"
  }
  expect_failures = [var.ami_id]
}

run "rejects_a_weak_redis_password" {
  command = plan
  variables {
    redis_password = "short"
  }
  expect_failures = [var.redis_password]
}

run "rejects_subnets_that_do_not_match_the_zones" {
  command = plan
  variables {
    availability_zones   = ["us-east-1a", "us-east-1b"]
    private_subnet_cidrs = ["10.40.128.0/20"]
  }
  expect_failures = [var.private_subnet_cidrs]
}

run "rejects_an_unknown_setting" {
  command = plan
  variables {
    settings = { drain_bach = "1000" }
  }
  expect_failures = [var.settings]
}

run "rejects_a_connection_variable_as_a_setting" {
  command = plan
  variables {
    settings = { redis_url = "redis://127.0.0.1:6379" }
  }
  expect_failures = [var.settings]
}

run "rejects_a_setting_that_does_not_parse" {
  command = plan
  variables {
    settings = { drain_batch = "1e3", demo_login = "yes" }
  }
  expect_failures = [var.settings]
}

run "rejects_short_app_secrets" {
  command = plan
  variables {
    secrets = {
      jwt_secret              = "short"
      admission_secret        = "test-admission-secret-test-admission"
      operators               = "ops:operator:test-operator-secret-test-operator-00"
      payment_webhook_secrets = "whsec_test-webhook-secret-test-webhook-0"
    }
  }
  expect_failures = [var.secrets]
}

# --- Who may run the jobs, and the demo sign-in ----------------------------------------------

# A scheduler calling the job routes over HTTP holds a credential of its own (role scheduler:
# the job routes and nothing else), never a person's secret.
run "the_scheduler_token_joins_the_operators" {
  command = apply

  variables {
    scheduler_token = "sched-token-sched-token-sched-token-00"
  }

  assert {
    condition     = aws_secretsmanager_secret_version.spin["operators"].secret_string == "${var.secrets.operators},scheduler:scheduler:sched-token-sched-token-sched-token-00"
    error_message = "the operators secret holds the people's entries, then scheduler:scheduler:<scheduler_token>"
  }
  assert {
    condition     = !strcontains(base64decode(aws_launch_template.app.user_data), var.scheduler_token) && issensitive(var.scheduler_token)
    error_message = "the scheduler token is a secret: never in user_data"
  }
}

run "no_scheduler_token_no_scheduler_entry" {
  command = apply

  assert {
    condition     = aws_secretsmanager_secret_version.spin["operators"].secret_string == var.secrets.operators
    error_message = "without scheduler_token (the cron trigger needs none), operators is as given"
  }
}

run "rejects_a_short_scheduler_token" {
  command = plan
  variables {
    scheduler_token = "sched-token-too-short"
  }
  expect_failures = [var.scheduler_token]
}

# demo_login = "true" lets anyone mint a buyer token: only where the root says it is a demo.
run "rejects_demo_login_outside_a_demo_environment" {
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
    condition     = output.spin_variables.settings == "demo_login=true,trusted_proxies=10.40.0.0/24 10.40.1.0/24"
    error_message = "demo_environment = true admits demo_login = \"true\""
  }
}

# --- The critical routes' own capacity (the manifest's request classes) ----------------------
# Each run sends every route of spin.toml (its sample paths, modules/request-classes) with every
# method (PURGE standing for the methods no entry names) through the listener's rules in priority
# order, first match wins, then the listener's default, and compares where it lands with what its
# class and the run's setting want: critical pairs to the critical group, every other request to
# the main group, and the 403s of CloudFront's origin check and operator_cidrs as before.

run "every_critical_pair_reaches_the_critical_group" {
  command = apply

  assert {
    condition = length([
      for q in flatten([
        for route, paths in module.request_classes.sample_paths : [
          for p in paths : [
            for m in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PURGE"] : [
              for v in [{ label = "", ip = "203.0.113.9/32", header = false }] : {
                request = "${m} ${p}${v.label}"
                class   = lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"])
                want    = lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"]) == "critical" ? "critical" : "main"
                got = concat([
                  for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                  r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                  if alltrue([for c in r.condition : (
                    (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                    (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                    (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                    (length(c.http_header) == 0 || v.header)
                  )])
                ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
              }
            ]
          ]
        ]
      ]) : "${q.request} (${q.class}) -> ${q.got}, not ${q.want}" if q.want != q.got
    ]) == 0
    error_message = "requests land in the wrong place: ${nonsensitive(join("; ", [
      for q in flatten([
        for route, paths in module.request_classes.sample_paths : [
          for p in paths : [
            for m in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PURGE"] : [
              for v in [{ label = "", ip = "203.0.113.9/32", header = false }] : {
                request = "${m} ${p}${v.label}"
                class   = lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"])
                want    = lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"]) == "critical" ? "critical" : "main"
                got = concat([
                  for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                  r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                  if alltrue([for c in r.condition : (
                    (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                    (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                    (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                    (length(c.http_header) == 0 || v.header)
                  )])
                ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
              }
            ]
          ]
        ]
      ]) : "${q.request} (${q.class}) -> ${q.got}, not ${q.want}" if q.want != q.got
    ]))}"
  }
  assert {
    condition = alltrue(flatten([
      for c in module.request_classes.critical_routes : [
        for g in c.alb_path_patterns : [
          for m in(length(c.methods) > 0 ? c.methods : ["*"]) : anytrue([
            for r in aws_lb_listener_rule.request_class :
            r.action[0].target_group_arn == aws_lb_target_group.critical.arn &&
            contains(flatten([for x in r.condition : flatten(x.path_pattern[*].values)]), g) &&
            (m == "*" ? length(flatten([for x in r.condition : flatten(x.http_request_method[*].values)])) == 0 : contains(flatten([for x in r.condition : flatten(x.http_request_method[*].values)]), m))
          ])
        ]
      ]
    ]))
    error_message = "every critical (route, method) pair of spin.toml has a listener rule to the critical target group"
  }
  assert {
    condition     = toset([for p in module.request_classes.critical_pairs : "${p.method} ${p.route}"]) == toset(["* /api/payments/webhook", "* /admin/events", "* /admin/events/:event_id/...", "* /admin/limits/global", "* /admin/webhooks", "* /admin/webhooks/...", "* /admin/jobs/:job", "* /admin/jobs/deliver-events"]) && output.critical_routes == module.request_classes.critical_pairs
    error_message = "spin.toml's critical pairs: the payment webhook, the job routes (every method), the operators' writes (every method but GET and HEAD)"
  }
  assert {
    condition = alltrue([
      for r in aws_lb_listener_rule.request_class :
      r.listener_arn == aws_lb_listener.http.arn && r.priority >= 100 && r.priority < 300 &&
      length(flatten([for c in r.condition : concat(flatten(c.path_pattern[*].values), flatten(c.http_request_method[*].values), flatten(c.source_ip[*].values), flatten(c.http_header[*].values))])) <= 5 &&
      alltrue([for c in r.condition : length(flatten(concat(c.path_pattern[*].values, c.http_request_method[*].values, c.source_ip[*].values))) <= 3]) &&
      length(regexall("[*?]", join("", flatten([for c in r.condition : flatten(c.path_pattern[*].values)])))) <= 5
    ])
    error_message = "the rules sit on the listener that serves the app, within ALB's limits: 5 values and 5 wildcards per rule, 3 values per condition"
  }
}

run "critical_routing_behind_cloudfront" {
  command = apply

  variables {
    cdn                       = true
    certificate_arn           = "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"
    cdn_origin_domain_name    = "origin.shop.example.com"
    cdn_origin_secret         = "test-origin-secret-test-origin-secret-00"
    cloudfront_prefix_list_id = "pl-3b927c52"
  }

  assert {
    condition = length([
      for q in flatten([
        for route, paths in module.request_classes.sample_paths : [
          for p in paths : [
            for m in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PURGE"] : [
              for v in [{ label = " through CloudFront", ip = "203.0.113.9/32", header = true }, { label = " without the origin header", ip = "203.0.113.9/32", header = false }] : {
                request = "${m} ${p}${v.label}"
                class   = lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"])
                want    = v.header ? (lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"]) == "critical" ? "critical" : "main") : "403"
                got = concat([
                  for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                  r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                  if alltrue([for c in r.condition : (
                    (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                    (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                    (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                    (length(c.http_header) == 0 || v.header)
                  )])
                ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
              }
            ]
          ]
        ]
      ]) : "${q.request} (${q.class}) -> ${q.got}, not ${q.want}" if q.want != q.got
    ]) == 0
    error_message = "requests land in the wrong place: ${nonsensitive(join("; ", [
      for q in flatten([
        for route, paths in module.request_classes.sample_paths : [
          for p in paths : [
            for m in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PURGE"] : [
              for v in [{ label = " through CloudFront", ip = "203.0.113.9/32", header = true }, { label = " without the origin header", ip = "203.0.113.9/32", header = false }] : {
                request = "${m} ${p}${v.label}"
                class   = lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"])
                want    = v.header ? (lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"]) == "critical" ? "critical" : "main") : "403"
                got = concat([
                  for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                  r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                  if alltrue([for c in r.condition : (
                    (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                    (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                    (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                    (length(c.http_header) == 0 || v.header)
                  )])
                ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
              }
            ]
          ]
        ]
      ]) : "${q.request} (${q.class}) -> ${q.got}, not ${q.want}" if q.want != q.got
    ]))}"
  }
  assert {
    condition     = alltrue([for r in aws_lb_listener_rule.request_class : r.priority < aws_lb_listener_rule.from_cdn[0].priority && r.listener_arn == aws_lb_listener.https[0].arn])
    error_message = "the request-class rules come before the CDN's catch-all rule, on the HTTPS listener"
  }
}

run "critical_routing_with_operator_cidrs" {
  command = apply

  variables {
    certificate_arn = "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"
    operator_cidrs  = ["198.51.100.0/24", "203.0.113.7/32", "192.0.2.0/28", "2001:db8::/48"]
  }

  assert {
    condition = length([
      for q in flatten([
        for route, paths in module.request_classes.sample_paths : [
          for p in paths : [
            for m in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PURGE"] : [
              for v in [{ label = " from an operator", ip = "2001:db8::/48", header = false }, { label = " from elsewhere", ip = "203.0.113.9/32", header = false }] : {
                request = "${m} ${p}${v.label}"
                class   = lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"])
                want    = v.ip != "2001:db8::/48" && (startswith(p, "/admin/") || startswith(p, "/console")) ? "403" : (lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"]) == "critical" ? "critical" : "main")
                got = concat([
                  for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                  r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                  if alltrue([for c in r.condition : (
                    (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                    (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                    (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                    (length(c.http_header) == 0 || v.header)
                  )])
                ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
              }
            ]
          ]
        ]
      ]) : "${q.request} (${q.class}) -> ${q.got}, not ${q.want}" if q.want != q.got
    ]) == 0
    error_message = "requests land in the wrong place: ${nonsensitive(join("; ", [
      for q in flatten([
        for route, paths in module.request_classes.sample_paths : [
          for p in paths : [
            for m in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PURGE"] : [
              for v in [{ label = " from an operator", ip = "2001:db8::/48", header = false }, { label = " from elsewhere", ip = "203.0.113.9/32", header = false }] : {
                request = "${m} ${p}${v.label}"
                class   = lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"])
                want    = v.ip != "2001:db8::/48" && (startswith(p, "/admin/") || startswith(p, "/console")) ? "403" : (lookup(module.request_classes.classes[route], m, module.request_classes.classes[route]["*"]) == "critical" ? "critical" : "main")
                got = concat([
                  for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                  r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                  if alltrue([for c in r.condition : (
                    (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                    (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                    (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                    (length(c.http_header) == 0 || v.header)
                  )])
                ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
              }
            ]
          ]
        ]
      ]) : "${q.request} (${q.class}) -> ${q.got}, not ${q.want}" if q.want != q.got
    ]))}"
  }
  assert {
    condition     = alltrue([for r in aws_lb_listener_rule.request_class : r.priority < min(aws_lb_listener_rule.operators_allowed[*].priority...)])
    error_message = "the request-class rules come before the operators' rules"
  }
}

# --- Paths the app does not serve, or not in this form (non-canonical) ---------------------
# Spin's router drops repeated leading slashes, so `//admin/events/e1` reaches the admin
# function while the load balancer's patterns (`/admin/*`) do not match it. The listener forwards
# only the manifest's routes' patterns (modules/request-classes) and refuses any path with `//`;
# anything else gets its default action: 404 (403 behind CloudFront without the origin header).

# The load balancer alone (plain HTTP): every such request is answered 404 at the listener.
run "non_canonical_and_unknown_paths_never_reach_the_app" {
  command = apply

  assert {
    condition = length([
      for q in flatten([
        for p in concat(
          # every route's paths with a repeated leading slash (Spin's router drops it), and with every slash doubled
          [for p in flatten(values(module.request_classes.sample_paths)) : "/${p}"],
          [for p in flatten(values(module.request_classes.sample_paths)) : replace(p, "/", "//")],
          # paths no route serves (but those the manifest now has)
          [for p in ["/", "/index.html", "/nope", "/admin", "/api", "/api/", "/ADMIN/events", "/shop.json", "/.well-known/spin/info", "/admin/../admin/events"] : p if !contains(flatten(values(module.request_classes.sample_paths)), p)],
          ) : [
          for m in ["GET", "HEAD", "POST", "PUT", "DELETE"] : [
            for v in [{ label = "", ip = "203.0.113.9/32", header = false }] : {
              request = "${m} ${p}${v.label}"
              want    = "404"
              got = concat([
                for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                if alltrue([for c in r.condition : (
                  (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                  (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                  (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                  (length(c.http_header) == 0 || v.header)
                )])
              ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
            }
          ]
        ]
      ]) : "${q.request} -> ${q.got}, not ${q.want}" if q.want != q.got
    ]) == 0
    error_message = "requests the app has no route for reach it: ${nonsensitive(join("; ", [
      for q in flatten([
        for p in concat(
          # every route's paths with a repeated leading slash (Spin's router drops it), and with every slash doubled
          [for p in flatten(values(module.request_classes.sample_paths)) : "/${p}"],
          [for p in flatten(values(module.request_classes.sample_paths)) : replace(p, "/", "//")],
          # paths no route serves (but those the manifest now has)
          [for p in ["/", "/index.html", "/nope", "/admin", "/api", "/api/", "/ADMIN/events", "/shop.json", "/.well-known/spin/info", "/admin/../admin/events"] : p if !contains(flatten(values(module.request_classes.sample_paths)), p)],
          ) : [
          for m in ["GET", "HEAD", "POST", "PUT", "DELETE"] : [
            for v in [{ label = "", ip = "203.0.113.9/32", header = false }] : {
              request = "${m} ${p}${v.label}"
              want    = "404"
              got = concat([
                for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                if alltrue([for c in r.condition : (
                  (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                  (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                  (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                  (length(c.http_header) == 0 || v.header)
                )])
              ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
            }
          ]
        ]
      ]) : "${q.request} -> ${q.got}, not ${q.want}" if q.want != q.got
    ]))}"
  }
  assert {
    condition = (
      aws_lb_listener.http.default_action[0].type == "fixed-response" &&
      aws_lb_listener.http.default_action[0].fixed_response[0].status_code == "404" &&
      jsondecode(aws_lb_listener.http.default_action[0].fixed_response[0].message_body).error.code == "not_found" &&
      aws_lb_listener_rule.non_canonical.priority < min(aws_lb_listener_rule.request_class[*].priority...) &&
      toset(one([for c in aws_lb_listener_rule.non_canonical.condition : c.path_pattern[0].values if length(c.path_pattern) > 0])) == toset(["*//*"])
    )
    error_message = "the listener's default is the API's 404 JSON error, and paths with `//` are refused before any other rule"
  }
}

# operator_cidrs: `//admin/...` from an address outside them must not reach the app (the attack),
# nor from an operator's (no route's canonical path); other unknown operators' paths meet the 403.
run "non_canonical_paths_never_reach_the_operators_paths_from_elsewhere" {
  command = apply

  variables {
    certificate_arn = "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"
    operator_cidrs  = ["198.51.100.0/24", "203.0.113.7/32", "192.0.2.0/28", "2001:db8::/48"]
  }

  assert {
    condition = length([
      for q in flatten([
        for p in concat(
          # every route's paths with a repeated leading slash (Spin's router drops it), and with every slash doubled
          [for p in flatten(values(module.request_classes.sample_paths)) : "/${p}"],
          [for p in flatten(values(module.request_classes.sample_paths)) : replace(p, "/", "//")],
          # paths no route serves (but those the manifest now has)
          [for p in ["/", "/index.html", "/nope", "/admin", "/api", "/api/", "/ADMIN/events", "/shop.json", "/.well-known/spin/info", "/admin/../admin/events"] : p if !contains(flatten(values(module.request_classes.sample_paths)), p)],
          ) : [
          for m in ["GET", "HEAD", "POST", "PUT", "DELETE"] : [
            for v in [{ label = " from an operator", ip = "2001:db8::/48", header = false }, { label = " from elsewhere", ip = "203.0.113.9/32", header = false }] : {
              request = "${m} ${p}${v.label}"
              want    = (!strcontains(p, "//") && (startswith(p, "/admin/") || startswith(p, "/console"))) ? "403" : "404"
              got = concat([
                for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                if alltrue([for c in r.condition : (
                  (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                  (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                  (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                  (length(c.http_header) == 0 || v.header)
                )])
              ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
            }
          ]
        ]
      ]) : "${q.request} -> ${q.got}, not ${q.want}" if q.want != q.got
    ]) == 0
    error_message = "requests the app has no route for reach it: ${nonsensitive(join("; ", [
      for q in flatten([
        for p in concat(
          # every route's paths with a repeated leading slash (Spin's router drops it), and with every slash doubled
          [for p in flatten(values(module.request_classes.sample_paths)) : "/${p}"],
          [for p in flatten(values(module.request_classes.sample_paths)) : replace(p, "/", "//")],
          # paths no route serves (but those the manifest now has)
          [for p in ["/", "/index.html", "/nope", "/admin", "/api", "/api/", "/ADMIN/events", "/shop.json", "/.well-known/spin/info", "/admin/../admin/events"] : p if !contains(flatten(values(module.request_classes.sample_paths)), p)],
          ) : [
          for m in ["GET", "HEAD", "POST", "PUT", "DELETE"] : [
            for v in [{ label = " from an operator", ip = "2001:db8::/48", header = false }, { label = " from elsewhere", ip = "203.0.113.9/32", header = false }] : {
              request = "${m} ${p}${v.label}"
              want    = (!strcontains(p, "//") && (startswith(p, "/admin/") || startswith(p, "/console"))) ? "403" : "404"
              got = concat([
                for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                if alltrue([for c in r.condition : (
                  (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                  (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                  (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                  (length(c.http_header) == 0 || v.header)
                )])
              ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
            }
          ]
        ]
      ]) : "${q.request} -> ${q.got}, not ${q.want}" if q.want != q.got
    ]))}"
  }
  assert {
    condition     = aws_lb_listener.https[0].default_action[0].type == "fixed-response" && aws_lb_listener.https[0].default_action[0].fixed_response[0].status_code == "404"
    error_message = "the HTTPS listener's default is 404"
  }
}

# CloudFront in front: through it (the origin header) such requests get 404; without the header,
# the default 403 (or the `//` rule's 404).
run "non_canonical_paths_never_reach_the_app_behind_cloudfront" {
  command = apply

  variables {
    cdn                       = true
    certificate_arn           = "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"
    cdn_origin_domain_name    = "origin.shop.example.com"
    cdn_origin_secret         = "test-origin-secret-test-origin-secret-00"
    cloudfront_prefix_list_id = "pl-3b927c52"
  }

  assert {
    condition = length([
      for q in flatten([
        for p in concat(
          # every route's paths with a repeated leading slash (Spin's router drops it), and with every slash doubled
          [for p in flatten(values(module.request_classes.sample_paths)) : "/${p}"],
          [for p in flatten(values(module.request_classes.sample_paths)) : replace(p, "/", "//")],
          # paths no route serves (but those the manifest now has)
          [for p in ["/", "/index.html", "/nope", "/admin", "/api", "/api/", "/ADMIN/events", "/shop.json", "/.well-known/spin/info", "/admin/../admin/events"] : p if !contains(flatten(values(module.request_classes.sample_paths)), p)],
          ) : [
          for m in ["GET", "HEAD", "POST", "PUT", "DELETE"] : [
            for v in [{ label = " through CloudFront", ip = "203.0.113.9/32", header = true }, { label = " without the origin header", ip = "203.0.113.9/32", header = false }] : {
              request = "${m} ${p}${v.label}"
              want    = (v.header || strcontains(p, "//")) ? "404" : "403"
              got = concat([
                for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                if alltrue([for c in r.condition : (
                  (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                  (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                  (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                  (length(c.http_header) == 0 || v.header)
                )])
              ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
            }
          ]
        ]
      ]) : "${q.request} -> ${q.got}, not ${q.want}" if q.want != q.got
    ]) == 0
    error_message = "requests the app has no route for reach it: ${nonsensitive(join("; ", [
      for q in flatten([
        for p in concat(
          # every route's paths with a repeated leading slash (Spin's router drops it), and with every slash doubled
          [for p in flatten(values(module.request_classes.sample_paths)) : "/${p}"],
          [for p in flatten(values(module.request_classes.sample_paths)) : replace(p, "/", "//")],
          # paths no route serves (but those the manifest now has)
          [for p in ["/", "/index.html", "/nope", "/admin", "/api", "/api/", "/ADMIN/events", "/shop.json", "/.well-known/spin/info", "/admin/../admin/events"] : p if !contains(flatten(values(module.request_classes.sample_paths)), p)],
          ) : [
          for m in ["GET", "HEAD", "POST", "PUT", "DELETE"] : [
            for v in [{ label = " through CloudFront", ip = "203.0.113.9/32", header = true }, { label = " without the origin header", ip = "203.0.113.9/32", header = false }] : {
              request = "${m} ${p}${v.label}"
              want    = (v.header || strcontains(p, "//")) ? "404" : "403"
              got = concat([
                for r in values({ for r in concat([aws_lb_listener_rule.non_canonical], aws_lb_listener_rule.request_class, aws_lb_listener_rule.operators_allowed, aws_lb_listener_rule.operators_only, aws_lb_listener_rule.known_paths, aws_lb_listener_rule.from_cdn) : format("%05d", r.priority) => r }) :
                r.action[0].type == "forward" ? (r.action[0].target_group_arn == aws_lb_target_group.critical.arn ? "critical" : "main") : r.action[0].fixed_response[0].status_code
                if alltrue([for c in r.condition : (
                  (length(c.path_pattern) == 0 || anytrue([for g in flatten(c.path_pattern[*].values) : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))])) &&
                  (length(c.http_request_method) == 0 || contains(flatten(c.http_request_method[*].values), m)) &&
                  (length(c.source_ip) == 0 || contains(flatten(c.source_ip[*].values), v.ip)) &&
                  (length(c.http_header) == 0 || v.header)
                )])
              ], [for a in(length(aws_lb_listener.https) > 0 ? aws_lb_listener.https[0] : aws_lb_listener.http).default_action : a.type == "forward" ? "main" : a.fixed_response[0].status_code])[0]
            }
          ]
        ]
      ]) : "${q.request} -> ${q.got}, not ${q.want}" if q.want != q.got
    ]))}"
  }
}

# --- CloudFront's cache key --------------------------------------------------------------------

# The cached routes (the shop's pages, assets and event reads, served by the web component) read
# no query parameter: a random `?x=` must neither make a cache entry of its own (a flood of them
# would reach the origin) nor be forwarded.
run "the_cdn_cache_key_holds_no_query_parameter_the_cached_routes_do_not_read" {
  command = apply

  variables {
    cdn                       = true
    certificate_arn           = "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"
    cdn_origin_domain_name    = "origin.shop.example.com"
    cdn_origin_secret         = "test-origin-secret-test-origin-secret-00"
    cloudfront_prefix_list_id = "pl-3b927c52"
  }

  assert {
    condition = (
      aws_cloudfront_cache_policy.origin_cache_control[0].parameters_in_cache_key_and_forwarded_to_origin[0].query_strings_config[0].query_string_behavior == "none" &&
      length(aws_cloudfront_cache_policy.origin_cache_control[0].parameters_in_cache_key_and_forwarded_to_origin[0].query_strings_config[0].query_strings) == 0
    )
    error_message = "the cached routes' cache key takes ${aws_cloudfront_cache_policy.origin_cache_control[0].parameters_in_cache_key_and_forwarded_to_origin[0].query_strings_config[0].query_string_behavior} query strings: they read none"
  }
  assert {
    condition = alltrue([
      for b in aws_cloudfront_distribution.app[0].ordered_cache_behavior :
      b.cache_policy_id == aws_cloudfront_cache_policy.origin_cache_control[0].id && b.origin_request_policy_id == null if contains(["/shop/events/*", "/shop", "/shop/*"], b.path_pattern)
    ]) && length([for b in aws_cloudfront_distribution.app[0].ordered_cache_behavior : b if contains(["/shop/events/*", "/shop", "/shop/*"], b.path_pattern)]) == 3
    error_message = "every cached behaviour uses that cache policy and no origin request policy (which could forward other query strings)"
  }
  assert {
    condition     = aws_cloudfront_cache_policy.origin_cache_control[0].parameters_in_cache_key_and_forwarded_to_origin[0].cookies_config[0].cookie_behavior == "none" && aws_cloudfront_cache_policy.origin_cache_control[0].parameters_in_cache_key_and_forwarded_to_origin[0].headers_config[0].header_behavior == "none"
    error_message = "no cookie or header in the key either"
  }
}

run "the_critical_group" {
  command = apply

  assert {
    condition = (
      aws_autoscaling_group.critical.min_size == 2 && aws_autoscaling_group.critical.desired_capacity == 2 && aws_autoscaling_group.critical.max_size == 2 &&
      aws_autoscaling_group.critical.target_group_arns == toset([aws_lb_target_group.critical.arn]) &&
      aws_autoscaling_group.app.target_group_arns == toset([aws_lb_target_group.app.arn]) &&
      aws_autoscaling_group.critical.launch_template[0].id == aws_launch_template.app.id &&
      aws_autoscaling_group.critical.health_check_type == "ELB" &&
      toset(aws_autoscaling_group.critical.vpc_zone_identifier) == toset([for s in aws_subnet.private : s.id])
    )
    error_message = "critical_instances (2) reserved instances of the same launch template, in the private subnets, in their own target group only"
  }
  assert {
    condition     = length([for p in aws_autoscaling_policy.cpu[*] : p if p.autoscaling_group_name == aws_autoscaling_group.critical.name]) == 0
    error_message = "the reserved group keeps its size: no scaling policy"
  }
  assert {
    condition = alltrue([
      for tg in [aws_lb_target_group.app, aws_lb_target_group.critical] :
      tg.health_check[0].path == "/.well-known/spin/health" && tg.health_check[0].matcher == "200" && tg.port == 3000
    ])
    error_message = "both groups are checked at /.well-known/spin/health, which Spin and seckill-host answer without an instance of the app (never shed with buyer reads)"
  }
  assert {
    condition     = output.critical_autoscaling_group_name == aws_autoscaling_group.critical.name && length(aws_wafv2_web_acl_association.lb) == 0
    error_message = "the group is an output; no web ACL unless given"
  }
}

run "the_critical_group_under_seckill_host" {
  command = plan

  variables {
    runtime            = "seckill-host"
    critical_instances = 3
  }

  assert {
    condition     = aws_autoscaling_group.critical.desired_capacity == 3 && length(aws_lb_listener_rule.request_class) > 0
    error_message = "our host sheds by class on every instance, and the critical routes keep their reserved group as under Spin"
  }
}

run "a_web_acl_on_the_distribution" {
  command = apply

  variables {
    cdn                       = true
    certificate_arn           = "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"
    cdn_origin_domain_name    = "origin.shop.example.com"
    cdn_origin_secret         = "test-origin-secret-test-origin-secret-00"
    cloudfront_prefix_list_id = "pl-3b927c52"
    web_acl_arn               = "arn:aws:wafv2:us-east-1:123456789012:global/webacl/seckill-edge/00000000-0000-0000-0000-000000000000"
  }

  assert {
    condition     = aws_cloudfront_distribution.app[0].web_acl_id == var.web_acl_arn && length(aws_wafv2_web_acl_association.lb) == 0
    error_message = "with CloudFront, the global web ACL is the distribution's (its rules see the viewer's address)"
  }
}

run "a_web_acl_on_the_load_balancer" {
  command = apply

  variables {
    web_acl_arn = "arn:aws:wafv2:us-east-1:123456789012:regional/webacl/seckill-lb/00000000-0000-0000-0000-000000000000"
  }

  assert {
    condition     = aws_wafv2_web_acl_association.lb[0].resource_arn == aws_lb.app.arn && aws_wafv2_web_acl_association.lb[0].web_acl_arn == var.web_acl_arn
    error_message = "without CloudFront, the regional web ACL is the load balancer's"
  }
}

run "rejects_a_regional_web_acl_behind_cloudfront" {
  command = plan
  variables {
    cdn               = true
    cdn_origin_secret = "test-origin-secret-test-origin-secret-00"
    web_acl_arn       = "arn:aws:wafv2:us-east-1:123456789012:regional/webacl/seckill-lb/00000000-0000-0000-0000-000000000000"
  }
  expect_failures = [var.web_acl_arn]
}

run "rejects_no_critical_instances" {
  command = plan
  variables {
    critical_instances = 0
  }
  expect_failures = [var.critical_instances]
}

run "rejects_operator_cidrs_beyond_the_load_balancers_rules" {
  command = plan
  variables {
    operator_cidrs = [for i in range(60) : "10.${i}.0.0/16"]
  }
  expect_failures = [aws_lb_listener.http]
}

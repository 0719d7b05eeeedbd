# The Spin app: an Auto Scaling group of EC2 instances in the private subnets, each running the
# app's spin.toml, cron triggers included, behind an Application Load Balancer. What runs it is
# the input `runtime`: "spin" (default), `spin up -f spin.toml` with the spin-trigger-cron plugin;
# "seckill-host", our wasmtime host from the release artifact under
# ../files/seckill-host.service. Same .wasm files, same manifest, same variables.
#
# Why instances and not EKS + SpinKube or Lambda: spin.toml's [[trigger.cron]] (the drain every
# second, timeout release every 5 s, reconcile every minute) runs only on self-hosted Spin with
# the cron plugin (or on our host); SpinKube's shim, Akamai Functions and Fermyon Cloud reject
# custom triggers and their schedulers fire once a minute at best. Instances keep the one-second
# drain, need no cluster to operate, and scale horizontally: every instance runs the cron jobs,
# and the drain's per-event lease in Redis (with fencing tokens in Postgres) makes parallel
# drainers safe.
#
# Spin's settings (files/boot.sh.tftpl, the seckill.service unit): `spin up --log-dir ""`
# (component output to the journal, not two files opened per request), `--runtime-config-file`
# with a static variables provider (spin.tf says what that costs), RUST_BACKTRACE unset and
# RUST_LIB_BACKTRACE=0 (no backtrace captured per request). tests/terraform/check_roots.py fails
# if one goes missing. Our host needs no runtime config (it resolves every variable once, at
# start); its unit unsets RUST_BACKTRACE and sets RUST_LIB_BACKTRACE=0 too.
#
# Two groups run the same launch template: the main one (`instances`, scaled on CPU) and a small,
# fixed one reserved for the critical routes (`critical_instances`): the payment provider's
# webhook, the job routes and operators' writes, as the manifest's request classes say
# (modules/request-classes). The load balancer's rules send every critical (route, method) pair to
# the critical group's target group and everything else to the main one, so a buyers' flood that
# fills the main group's instance pools (real Spin answers an empty 500 at a full pool, and a slow
# request body holds an instance) never takes the capacity the order chain needs. Under
# runtime = "seckill-host" the host also sheds by class on every instance; the reserved group
# stays, because shedding costs the main group CPU and connections too, and it is the same few
# lines. Every instance of both groups runs the cron triggers (the drain's lease makes that safe).
#
# Rollout: a new artifact or setting makes a new launch template version; each group's instance
# refresh replaces instances a few at a time. Each new instance applies pending migrations before
# it serves (under a Postgres advisory lock, so simultaneous boots wait for each other); old
# instances keep serving meanwhile, so migrations must stay backward compatible. Changing
# `runtime` rolls the instances the same way.

locals {
  partition = startswith(var.region, "cn-") ? "aws-cn" : (startswith(var.region, "us-gov-") ? "aws-us-gov" : "aws")
  spin_url  = var.spin_download_url != null ? var.spin_download_url : "https://github.com/spinframework/spin/releases/download/${var.spin_version}/spin-${var.spin_version}-linux-${var.instance_arch}.tar.gz"
  # The cron plugin's tarball of the pinned release, for the instances' architecture.
  cron_plugin_url = "https://github.com/spinframework/spin-trigger-plugins/releases/download/cron-v${var.cron_plugin.version}/trigger-cron-${var.cron_plugin.version}-linux-${var.instance_arch}.tar.gz"
  rds_ca_url      = var.rds_ca_bundle_url != null ? var.rds_ca_bundle_url : "https://truststore.pki.rds.amazonaws.com/${var.region}/${var.region}-bundle.pem"

  artifact_s3  = startswith(var.app_artifact_url, "s3://")
  artifact_arn = local.artifact_s3 ? "arn:${local.partition}:s3:::${trimprefix(var.app_artifact_url, "s3://")}" : null

  # /etc/seckill/boot.env: settings of the boot script and the service, and the non-secret Spin
  # variables. Secrets appear here only as Secrets Manager ARNs. Spin's download settings only
  # where Spin is installed (runtime = "spin": the same file as before the input existed).
  boot_env = merge(
    local.host ? {} : {
      SECKILL_SPIN_URL            = local.spin_url
      SECKILL_SPIN_SHA256         = var.spin_sha256
      SECKILL_ARCH                = var.instance_arch
      SECKILL_CRON_PLUGIN_VERSION = var.cron_plugin.version
      SECKILL_CRON_PLUGIN_URL     = local.cron_plugin_url
      SECKILL_CRON_PLUGIN_SHA256  = var.cron_plugin.sha256[var.instance_arch]
    },
    {
      SECKILL_REGION              = var.region
      SECKILL_APP_PORT            = tostring(var.app_port)
      SECKILL_APP_ARTIFACT_URL    = var.app_artifact_url
      SECKILL_APP_ARTIFACT_SHA256 = var.app_artifact_sha256
      SECKILL_RDS_CA_URL          = local.rds_ca_url
      SECKILL_SECRET_ARNS         = join(" ", [for k in local.spin_secret_names : "${k}=${aws_secretsmanager_secret.spin[k].arn}" if contains(keys(aws_secretsmanager_secret.spin), k)])
      # The migration step's (files/migrate.sh): the master's URL and the app role's password.
      SECKILL_MIGRATION_PG_URL_ARN = aws_secretsmanager_secret.migration["pg_url"].arn
      SECKILL_PG_APP_PASSWORD_ARN  = aws_secretsmanager_secret.migration["app_password"].arn
      SECKILL_PG_APP_ROLE          = var.postgres_app_username
    },
    { for k, v in local.spin_public_variables : "SPIN_VARIABLE_${upper(k)}" => v },
  )

  # Files shipped in user_data without their comment lines (EC2 limits user_data to 16 KiB); the
  # files in the repo explain them.
  shipped = {
    for name, path in {
      spin-runtime-config   = "${path.module}/../files/spin-runtime-config.sh"
      migrate-locked        = "${path.module}/../files/migrate-locked.sh"
      seckill-host-unit     = "${path.module}/../files/seckill-host.service"
      seckill-host-prestart = "${path.module}/files/host-prestart.sh"
      migrate               = "${path.module}/files/migrate.sh"
    } : name => join("\n", [for l in split("\n", trimsuffix(file(path), "\n")) : l if !can(regex("^[ \t]*#($|[^!])", l))])
  }

  # runtime = "seckill-host": the unit as the release ships it, but for the last line of its
  # ExecStart, which becomes this root's: a keep-alive idle timeout above the ALB's (so the
  # balancer, not the host, closes an idle connection: no 502 for a request sent as the host
  # closes), and --metrics-listen only when metrics_listen is given.
  host                   = var.runtime == "seckill-host"
  host_unit_metrics_line = " \\\n    --metrics-listen 127.0.0.1:9090\n"
  host_unit_flags        = concat(["--idle-timeout ${var.lb_idle_timeout + 15}s"], var.metrics_listen == null ? [] : ["--metrics-listen ${var.metrics_listen}"])
  host_unit = replace(
    "${local.shipped.seckill-host-unit}\n",
    local.host_unit_metrics_line,
    "${join("", [for f in local.host_unit_flags : " \\\n    ${f}"])}\n",
  )
  metrics_port = var.metrics_listen == null ? null : tonumber(regex(":([0-9]+)$", var.metrics_listen)[0])

  # The boot script (files/boot.sh.tftpl, rendered for the runtime) after the files it installs.
  # Spin's runtime config writer only for Spin; the host's unit and ExecStartPre only for it.
  user_data = join("\n", concat(
    [
      "#!/bin/bash",
      "set -euo pipefail",
      "install -d -m 0755 /etc/seckill",
      "cat >/etc/seckill/boot.env <<'SECKILL_BOOT_ENV'",
      join("\n", [for k, v in local.boot_env : "${k}=\"${v}\""]),
      "SECKILL_BOOT_ENV",
      "cat >/etc/seckill/migrate-locked <<'SECKILL_MIGRATE'",
      local.shipped.migrate-locked,
      "SECKILL_MIGRATE",
      "cat >/etc/seckill/migrate <<'SECKILL_MIGRATE_AWS'",
      local.shipped.migrate,
      "SECKILL_MIGRATE_AWS",
    ],
    local.host ? [
      "cat >/etc/seckill/seckill-host.service <<'SECKILL_UNIT'",
      trimsuffix(local.host_unit, "\n"),
      "SECKILL_UNIT",
      "cat >/etc/seckill/host-prestart <<'SECKILL_PRESTART'",
      local.shipped.seckill-host-prestart,
      "SECKILL_PRESTART",
      ] : [
      "cat >/etc/seckill/spin-runtime-config <<'SECKILL_RUNTIME_CONFIG'",
      local.shipped.spin-runtime-config,
      "SECKILL_RUNTIME_CONFIG",
    ],
    [templatefile("${path.module}/files/boot.sh.tftpl", { runtime = var.runtime })],
  ))
}

# --- Instance role: read the app's and the migration's secrets (and the artifact, when on S3) ---

resource "aws_iam_role" "app" {
  name_prefix = "${var.name}-app-"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_iam_role_policy" "app" {
  name = "seckill-app"
  role = aws_iam_role.app.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = concat(
      [{
        Sid      = "SpinSecrets"
        Effect   = "Allow"
        Action   = ["secretsmanager:GetSecretValue"]
        Resource = concat([for s in aws_secretsmanager_secret.spin : s.arn], [for s in aws_secretsmanager_secret.migration : s.arn])
      }],
      var.secrets_kms_key_id == null ? [] : [{
        Sid      = "SpinSecretsKey"
        Effect   = "Allow"
        Action   = ["kms:Decrypt"]
        Resource = [var.secrets_kms_key_id]
      }],
      local.artifact_s3 ? [{
        Sid      = "AppArtifact"
        Effect   = "Allow"
        Action   = ["s3:GetObject"]
        Resource = [local.artifact_arn]
      }] : [],
    )
  })
}

resource "aws_iam_role_policy_attachment" "ssm" {
  count      = var.ssm_access ? 1 : 0
  role       = aws_iam_role.app.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "app" {
  name_prefix = "${var.name}-app-"
  role        = aws_iam_role.app.name
}

# --- Instances ------------------------------------------------------------------------------

resource "aws_launch_template" "app" {
  name_prefix            = "${var.name}-app-"
  image_id               = var.ami_id
  instance_type          = var.instance_type
  update_default_version = true
  vpc_security_group_ids = [aws_security_group.app.id]
  user_data              = base64encode(local.user_data)

  iam_instance_profile {
    arn = aws_iam_instance_profile.app.arn
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required" # IMDSv2 only
    http_put_response_hop_limit = 1
  }

  block_device_mappings {
    device_name = var.root_device_name
    ebs {
      volume_size           = var.root_volume_gib
      volume_type           = "gp3"
      encrypted             = true
      delete_on_termination = true
    }
  }

  monitoring {
    enabled = true
  }

  tag_specifications {
    resource_type = "instance"
    tags          = merge({ Name = "${var.name}-app", Application = var.name }, var.tags)
  }

  lifecycle {
    precondition {
      condition     = alltrue([for v in values(local.boot_env) : !can(regex("[\"$`\\\\\\n]", v))])
      error_message = "Settings passed to the instances cannot contain quotes, $, backticks, backslashes or newlines."
    }
    precondition {
      condition     = !local.host || strcontains("${local.shipped.seckill-host-unit}\n", local.host_unit_metrics_line)
      error_message = "../files/seckill-host.service's ExecStart no longer ends with `--metrics-listen 127.0.0.1:9090`, the line app.tf replaces with this root's flags: update local.host_unit_metrics_line."
    }
    precondition {
      # EC2 limits user data to 16 KiB before base64 encoding.
      condition     = length(local.user_data) <= 16384
      error_message = "user_data is over EC2's 16 KiB limit."
    }
  }
}

resource "aws_autoscaling_group" "app" {
  name_prefix               = "${var.name}-app-"
  vpc_zone_identifier       = [for s in aws_subnet.private : s.id]
  min_size                  = var.instances.min
  desired_capacity          = var.instances.desired
  max_size                  = var.instances.max
  health_check_type         = "ELB"
  health_check_grace_period = 600 # packages, Spin (or not), the artifact, migrations
  target_group_arns         = [aws_lb_target_group.app.arn]

  launch_template {
    id      = aws_launch_template.app.id
    version = aws_launch_template.app.latest_version
  }

  instance_refresh {
    strategy = "Rolling"
    preferences {
      min_healthy_percentage = 50
    }
  }

  tag {
    key                 = "Name"
    value               = "${var.name}-app"
    propagate_at_launch = true
  }

  depends_on = [aws_route.private_nat, aws_secretsmanager_secret_version.spin, aws_secretsmanager_secret_version.migration]
}

resource "aws_autoscaling_policy" "cpu" {
  name                   = "${var.name}-cpu"
  autoscaling_group_name = aws_autoscaling_group.app.name
  policy_type            = "TargetTrackingScaling"

  target_tracking_configuration {
    predefined_metric_specification {
      predefined_metric_type = "ASGAverageCPUUtilization"
    }
    target_value = var.cpu_target_percent
  }
}

# The critical routes' reserved instances: the same launch template, a fixed size, no scaling
# policy (their load is the provider's webhooks and operators' writes, not the sale's crowd).
# Created, it is waited for until its instances pass the target group's check, and the listener
# rules that send the critical routes to it come after: on a running deployment those routes
# keep reaching the main group until the reserved one serves.
resource "aws_autoscaling_group" "critical" {
  name_prefix               = "${var.name}-critical-"
  vpc_zone_identifier       = [for s in aws_subnet.private : s.id]
  min_size                  = var.critical_instances
  desired_capacity          = var.critical_instances
  max_size                  = var.critical_instances
  health_check_type         = "ELB"
  health_check_grace_period = 600
  target_group_arns         = [aws_lb_target_group.critical.arn]
  min_elb_capacity          = var.critical_instances
  wait_for_capacity_timeout = "20m" # packages, Spin (or not), the artifact, migrations

  launch_template {
    id      = aws_launch_template.app.id
    version = aws_launch_template.app.latest_version
  }

  instance_refresh {
    strategy = "Rolling"
    preferences {
      min_healthy_percentage = 50
    }
  }

  tag {
    key                 = "Name"
    value               = "${var.name}-critical"
    propagate_at_launch = true
  }

  depends_on = [aws_route.private_nat, aws_secretsmanager_secret_version.spin, aws_secretsmanager_secret_version.migration]
}

# --- Load balancer --------------------------------------------------------------------------

resource "aws_lb" "app" {
  name                       = "${var.name}-app"
  load_balancer_type         = "application"
  internal                   = var.lb_internal
  subnets                    = [for s in aws_subnet.public : s.id]
  security_groups            = [aws_security_group.lb.id]
  idle_timeout               = var.lb_idle_timeout
  drop_invalid_header_fields = true
  # The client's address ends X-Forwarded-For: what the app reads behind a trusted proxy. Behind
  # CloudFront, which appends the viewer's address, the header passes on unchanged (cdn.tf).
  xff_header_processing_mode = var.cdn ? "preserve" : "append"
}

# The targets' health check (both groups): health_check_path, by default Spin's
# /.well-known/spin/health, answered before routing and without an instance of the app (Spin
# crates/trigger-http/src/server.rs, `handle`; seckill-host likewise), so neither a full instance
# pool nor the host shedding buyer reads marks a busy instance unhealthy (which would move its
# load onto the others and have the group replace it), nor does an outage of Redis or Postgres.
resource "aws_lb_target_group" "app" {
  name_prefix          = "sk-"
  port                 = var.app_port
  protocol             = "HTTP"
  vpc_id               = aws_vpc.main.id
  deregistration_delay = 30

  health_check {
    path                = var.health_check_path
    matcher             = "200"
    interval            = 10
    healthy_threshold   = 2
    unhealthy_threshold = 3
  }

  lifecycle { create_before_destroy = true }
}

resource "aws_lb_target_group" "critical" {
  name_prefix          = "skc-"
  port                 = var.app_port
  protocol             = "HTTP"
  vpc_id               = aws_vpc.main.id
  deregistration_delay = 30

  health_check {
    path                = var.health_check_path
    matcher             = "200"
    interval            = 10
    healthy_threshold   = 2
    unhealthy_threshold = 3
  }

  lifecycle { create_before_destroy = true }
}

# A WAFv2 web ACL on the load balancer when there is no CloudFront in front (with cdn, the ACL is
# the distribution's: cdn.tf).
resource "aws_wafv2_web_acl_association" "lb" {
  count        = !var.cdn && var.web_acl_arn != null ? 1 : 0
  resource_arn = aws_lb.app.arn
  web_acl_arn  = var.web_acl_arn
}

resource "aws_lb_listener" "https" {
  count             = local.https ? 1 : 0
  load_balancer_arn = aws_lb.app.arn
  port              = 443
  protocol          = "HTTPS"
  ssl_policy        = var.ssl_policy
  certificate_arn   = var.certificate_arn

  # What no rule forwards is refused: the rules forward the manifest's routes only (below). Behind
  # CloudFront, a request without its origin header is answered 403 (cdn.tf).
  default_action {
    type = "fixed-response"

    fixed_response {
      content_type = "application/json"
      status_code  = var.cdn ? "403" : "404"
      message_body = var.cdn ? local.not_through_cdn : local.not_found
    }
  }
}

# Port 80 redirects to HTTPS when there is a certificate, and serves plain HTTP only without one
# (allow_plain_http; behind CloudFront, only CloudFront's requests): then its rules forward the
# routes and its default refuses the rest, as the HTTPS listener's do.
resource "aws_lb_listener" "http" {
  load_balancer_arn = aws_lb.app.arn
  port              = 80
  protocol          = "HTTP"

  default_action {
    type = local.https ? "redirect" : "fixed-response"

    dynamic "fixed_response" {
      for_each = local.https ? [] : [1]
      content {
        content_type = "application/json"
        status_code  = var.cdn ? "403" : "404"
        message_body = var.cdn ? local.not_through_cdn : local.not_found
      }
    }

    dynamic "redirect" {
      for_each = local.https ? [1] : []
      content {
        port        = "443"
        protocol    = "HTTPS"
        status_code = "HTTP_301"
      }
    }
  }

  lifecycle {
    precondition {
      condition     = local.lb_rule_count <= 100
      error_message = "The load balancer would hold ${local.lb_rule_count} listener rules, over ALB's 100: the operators' routes' rules repeat operator_cidrs; give fewer, wider ranges."
    }
  }
}

# --- Only the app's routes, in their canonical form -----------------------------------------
# The listener forwards the path patterns of the manifest's routes (modules/request-classes reads
# spin.toml, the manifest the instances run) and nothing else: its default action answers any
# other path 404 with the API's JSON error (403 behind CloudFront without its origin header). A
# path with `//` anywhere is refused first: Spin's router drops repeated leading slashes, so
# `//admin/events/e1` would reach the admin function while no pattern of the operators' paths
# (`/admin/*`) matches it. Rules, first match wins:
#   1    non_canonical: `*//*` -> 404;
#   100  request_class: the critical routes (below);
#   300  operators_allowed: the operators' routes from operator_cidrs (with operator_cidrs);
#   1000 operators_only: `/admin/*`, `/console*` -> 403 (with operator_cidrs);
#   1100 known_paths: every other route's patterns (the operators' too without operator_cidrs);
#   2000 from_cdn: CloudFront's other requests -> 404 (with cdn);
#   then the listener's default: 404, or 403 behind CloudFront.
# A rule holds at most 5 condition values, 3 to a condition (each path, address and the origin
# header counts one) and 5 wildcards: the paths go 3 to a rule (fewer when they hold 2 or more
# wildcards), 2 beside 3 addresses.

locals {
  # The listener that serves the app: HTTPS, else plain HTTP.
  app_listener_arn     = local.https ? aws_lb_listener.https[0].arn : aws_lb_listener.http.arn
  operator_paths       = ["/admin/*", "/console*"]
  operator_cidr_groups = chunklist(var.operator_cidrs, 3)
  not_through_cdn      = jsonencode({ error = { code = "forbidden", message = "this address serves CloudFront only" } })
  not_found            = jsonencode({ error = { code = "not_found", message = "no such route" } })

  # Every route's patterns, and which of them lie under the operators' paths.
  lb_known_paths    = distinct(flatten([for r in module.request_classes.routes : module.request_classes.alb_path_patterns[r]]))
  lb_operator_paths = [for p in local.lb_known_paths : p if anytrue([for o in local.operator_paths : can(regex("^${replace(replace(o, ".", "\\."), "*", ".*")}$", p))])]
  # With operator_cidrs the operators' routes are forwarded from those ranges only; without, with
  # the rest.
  lb_path_sets = {
    operators = length(var.operator_cidrs) > 0 ? local.lb_operator_paths : []
    public    = [for p in local.lb_known_paths : p if length(var.operator_cidrs) == 0 || !contains(local.lb_operator_paths, p)]
  }
  # The paths in chunks that fit a rule: by their wildcards, 3 (or 2 beside the addresses) to a
  # rule, at most 5 wildcards.
  lb_path_chunks = { for set, paths in local.lb_path_sets : set => concat([], [
    for w in sort(distinct([for p in paths : format("%02d", length(regexall("[*?]", p)))])) : chunklist(
      [for p in paths : p if format("%02d", length(regexall("[*?]", p))) == w],
      max(1, min(set == "operators" ? 2 - local.lb_header_values : 3, floor(5 / max(1, tonumber(w))))),
    )
  ]...) }
  lb_operator_rules = [for combo in setproduct(local.lb_path_chunks.operators, local.operator_cidr_groups) : { paths = combo[0], source_ips = combo[1] }]
}

resource "aws_lb_listener_rule" "non_canonical" {
  listener_arn = local.app_listener_arn
  priority     = local.lb_priority.non_canonical

  action {
    type = "fixed-response"
    fixed_response {
      content_type = "application/json"
      status_code  = "404"
      message_body = jsonencode({ error = { code = "not_found", message = "no route has an empty path segment" } })
    }
  }
  condition {
    path_pattern {
      values = ["*//*"]
    }
  }
}

resource "aws_lb_listener_rule" "known_paths" {
  count        = length(local.lb_path_chunks.public)
  listener_arn = local.app_listener_arn
  priority     = local.lb_priority.known + count.index

  action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.app.arn
  }
  condition {
    path_pattern {
      values = local.lb_path_chunks.public[count.index]
    }
  }
  dynamic "condition" {
    for_each = var.cdn ? [1] : []
    content {
      http_header {
        http_header_name = local.cdn_origin_header
        values           = [var.cdn_origin_secret]
      }
    }
  }

  lifecycle {
    precondition {
      condition     = length(local.lb_path_chunks.public[count.index]) + local.lb_header_values <= 5 && length(local.lb_path_chunks.public[count.index]) <= 3 && length(regexall("[*?]", join("", local.lb_path_chunks.public[count.index]))) <= 5
      error_message = "A route rule exceeds ALB's limits (5 values and 5 wildcards per rule, 3 values per condition): ${jsonencode(local.lb_path_chunks.public[count.index])}."
    }
  }
}

# --- Operators' paths from operators' addresses only (operator_cidrs) ------------------------
# ALB conditions cannot be negated: requests for the operators' routes from operator_cidrs are
# forwarded by the first rules, and the last answers any other request for the operators' paths
# 403 with the API's JSON error.

resource "aws_lb_listener_rule" "operators_allowed" {
  count        = length(local.lb_operator_rules)
  listener_arn = local.app_listener_arn
  priority     = local.lb_priority.operators + count.index

  action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.app.arn
  }
  condition {
    path_pattern {
      values = local.lb_operator_rules[count.index].paths
    }
  }
  condition {
    source_ip {
      values = local.lb_operator_rules[count.index].source_ips
    }
  }
  dynamic "condition" {
    for_each = var.cdn ? [1] : []
    content {
      http_header {
        http_header_name = local.cdn_origin_header
        values           = [var.cdn_origin_secret]
      }
    }
  }
}

resource "aws_lb_listener_rule" "operators_only" {
  count        = length(var.operator_cidrs) > 0 ? 1 : 0
  listener_arn = local.app_listener_arn
  priority     = local.lb_priority.operators_only

  action {
    type = "fixed-response"
    fixed_response {
      content_type = "application/json"
      status_code  = "403"
      message_body = jsonencode({ error = { code = "forbidden", message = "operators' paths are open to operators' addresses only" } })
    }
  }
  condition {
    path_pattern {
      values = local.operator_paths
    }
  }
}

# --- The critical routes to their own capacity ----------------------------------------------
# The manifest's request classes (modules/request-classes reads spin.toml, the manifest the
# instances run; a route without a class fails the plan) give each critical route its ALB path
# patterns and which of its methods are critical. Rules, first match wins:
#   1. a route whose methods are critical but for some named with a lower class (the operators'
#      GET and HEAD of /admin/events): path + those methods -> the main group;
#   2. every critical route: path (+ its critical methods, where only some are) -> the critical
#      group;
#   3. the operators' rules (operator_cidrs), every other route's patterns to the main group
#      (above), the CDN's 404;
#   4. the listener's default action: 404 (or 403 behind CloudFront).
# Behind CloudFront rules 1 and 2 also require the origin header, as the CDN's rule does; with
# operator_cidrs, the rules for the operators' paths carry the operators' ranges, so an address
# outside them still meets the 403 of rule 3. ALB's limits: at most 3 values per condition and 5
# per rule (paths, methods, addresses and the header each count one) and 5 wildcards per rule, so
# routes that share their methods share a rule while they fit, and the rest is split.

module "request_classes" {
  source = "../modules/request-classes"

  manifest = file("${path.module}/../../../spin.toml")
}

locals {
  lb_priority = { non_canonical = 1, critical = 100, operators = 300, operators_only = 1000, known = 1100, cdn = 2000 }

  # Each critical route as ALB rule material: its paths, the methods (empty: any) and whether it
  # lies under the operators' paths (then operator_cidrs applies to it).
  lb_class_routes = [for c in module.request_classes.critical_routes : {
    paths          = c.alb_path_patterns
    methods        = c.methods
    except_methods = c.except_methods
    operators      = anytrue([for p in c.alb_path_patterns : anytrue([for o in local.operator_paths : can(regex("^${replace(replace(o, ".", "\\."), "*", ".*")}$", p))])])
  }]
  lb_class_segments = {
    main     = [for c in local.lb_class_routes : { paths = c.paths, methods = c.except_methods, operators = c.operators } if length(c.except_methods) > 0]
    critical = [for c in local.lb_class_routes : { paths = c.paths, methods = c.methods, operators = c.operators }]
  }
  # Routes with the same methods (and, with operator_cidrs, on the same side of the operators'
  # paths) share rules.
  lb_class_groups = { for target, segments in local.lb_class_segments : target => [
    for key in distinct([for s in segments : "${join(",", s.methods)}|${s.operators && length(var.operator_cidrs) > 0}"]) : {
      methods   = [for s in segments : s.methods if "${join(",", s.methods)}|${s.operators && length(var.operator_cidrs) > 0}" == key][0]
      ips       = endswith(key, "|true") ? var.operator_cidrs : []
      paths     = distinct(flatten([for s in segments : s.paths if "${join(",", s.methods)}|${s.operators && length(var.operator_cidrs) > 0}" == key]))
      wildcards = max(1, [for s in segments : max([for p in s.paths : length(regexall("[*?]", p))]...) if "${join(",", s.methods)}|${s.operators && length(var.operator_cidrs) > 0}" == key]...)
    }
  ] }
  # Values per rule: the header (behind CloudFront), up to 3 methods, then addresses (up to 3,
  # leaving one value for a path), then paths with what is left (and at most 5 wildcards).
  lb_header_values = var.cdn ? 1 : 0
  lb_class_rules = flatten([for target in ["main", "critical"] : [
    for g in local.lb_class_groups[target] : [
      for combo in setproduct(
        chunklist(g.paths, max(1, min(3,
          5 - local.lb_header_values - min(3, length(g.methods)) - (length(g.ips) > 0 ? max(1, min(3, 4 - local.lb_header_values - min(3, length(g.methods)))) : 0),
          floor(5 / g.wildcards),
        ))),
        length(g.methods) > 0 ? chunklist(g.methods, 3) : [[]],
        length(g.ips) > 0 ? chunklist(g.ips, max(1, min(3, 4 - local.lb_header_values - min(3, length(g.methods))))) : [[]],
      ) : { target = target, paths = combo[0], methods = combo[1], source_ips = combo[2] }
    ]
  ]])
  lb_rule_count = 1 + length(local.lb_class_rules) + length(local.lb_operator_rules) + (length(var.operator_cidrs) > 0 ? 1 : 0) + length(local.lb_path_chunks.public) + (var.cdn ? 1 : 0)
}

resource "aws_lb_listener_rule" "request_class" {
  count        = length(local.lb_class_rules)
  listener_arn = local.app_listener_arn
  priority     = local.lb_priority.critical + count.index

  action {
    type             = "forward"
    target_group_arn = local.lb_class_rules[count.index].target == "critical" ? aws_lb_target_group.critical.arn : aws_lb_target_group.app.arn
  }
  condition {
    path_pattern {
      values = local.lb_class_rules[count.index].paths
    }
  }
  dynamic "condition" {
    for_each = length(local.lb_class_rules[count.index].methods) > 0 ? [1] : []
    content {
      http_request_method {
        values = local.lb_class_rules[count.index].methods
      }
    }
  }
  dynamic "condition" {
    for_each = length(local.lb_class_rules[count.index].source_ips) > 0 ? [1] : []
    content {
      source_ip {
        values = local.lb_class_rules[count.index].source_ips
      }
    }
  }
  dynamic "condition" {
    for_each = var.cdn ? [1] : []
    content {
      http_header {
        http_header_name = local.cdn_origin_header
        values           = [var.cdn_origin_secret]
      }
    }
  }

  depends_on = [aws_autoscaling_group.critical]

  lifecycle {
    precondition {
      condition = (
        length(local.lb_class_rules[count.index].paths) + length(local.lb_class_rules[count.index].methods) + length(local.lb_class_rules[count.index].source_ips) + local.lb_header_values <= 5 &&
        length(local.lb_class_rules[count.index].methods) <= 3 && length(local.lb_class_rules[count.index].source_ips) <= 3 &&
        length(regexall("[*?]", join("", local.lb_class_rules[count.index].paths))) <= 5
      )
      error_message = "A request-class rule exceeds ALB's limits (5 values and 5 wildcards per rule, 3 values per condition): ${jsonencode(local.lb_class_rules[count.index])}."
    }
  }
}

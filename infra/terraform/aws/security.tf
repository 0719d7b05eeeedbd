# Security groups, one per tier, with every rule listed here (one resource per direction, driven
# by a map, so the tests can check them all at once):
#   clients -> LB listeners (80, and 443 with a certificate), or with the CDN only CloudFront's
#   origin-facing prefix list -> the one port its origin uses: the only ingress from outside, but
#   for metrics_ingress_cidrs -> the metrics port (runtime = "seckill-host", metrics_listen set);
#   LB -> app port; app -> Redis port; app -> Postgres port; app -> HTTPS (boot-time downloads,
#   Secrets Manager, the payment provider's API). Redis and Postgres accept only the app's group
#   and open nothing outward.
# Terraform removes the default allow-all egress rule of each group it creates.

resource "aws_security_group" "lb" {
  name_prefix = "${var.name}-lb-"
  description = "seckill load balancer"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-lb" }
  lifecycle { create_before_destroy = true }
}

resource "aws_security_group" "app" {
  name_prefix = "${var.name}-app-"
  description = "seckill Spin instances"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-app" }
  lifecycle { create_before_destroy = true }
}

resource "aws_security_group" "redis" {
  name_prefix = "${var.name}-redis-"
  description = "seckill Redis"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-redis" }
  lifecycle { create_before_destroy = true }
}

resource "aws_security_group" "postgres" {
  name_prefix = "${var.name}-postgres-"
  description = "seckill PostgreSQL"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-postgres" }
  lifecycle { create_before_destroy = true }
}

locals {
  https          = var.certificate_arn != null
  listener_ports = local.https ? [80, 443] : [80]
  # The prefix list counts as its size (about 55) against the group's rule quota (60 by
  # default): one rule, on the port CloudFront's origin uses (cdn.tf).
  lb_clients = var.cdn ? {
    "lb-cloudfront" = { group = aws_security_group.lb.id, port = local.https ? 443 : 80, cidr = null, peer = null, prefix_list = local.cloudfront_prefix_list_id, description = "CloudFront to the listener" }
    } : {
    for pair in setproduct(local.listener_ports, var.lb_ingress_cidrs) :
    "lb-${pair[0]}-${pair[1]}" => { group = aws_security_group.lb.id, port = pair[0], cidr = pair[1], peer = null, prefix_list = null, description = "clients to the listener" }
  }

  # key => { group, port, and a CIDR, a source/destination group or a prefix list }
  ingress_rules = merge(
    local.lb_clients,
    {
      "app-from-lb"       = { group = aws_security_group.app.id, port = var.app_port, cidr = null, peer = aws_security_group.lb.id, prefix_list = null, description = "load balancer to spin up" }
      "redis-from-app"    = { group = aws_security_group.redis.id, port = var.redis_port, cidr = null, peer = aws_security_group.app.id, prefix_list = null, description = "app to Redis (TLS)" }
      "postgres-from-app" = { group = aws_security_group.postgres.id, port = var.postgres_port, cidr = null, peer = aws_security_group.app.id, prefix_list = null, description = "app to Postgres (TLS)" }
    },
    {
      for c in var.metrics_ingress_cidrs : # only with metrics_listen set (its validation)
      "app-metrics-${c}" => { group = aws_security_group.app.id, port = local.metrics_port, cidr = c, peer = null, prefix_list = null, description = "Prometheus to seckill-host's metrics" }
    },
  )

  egress_rules = merge(
    {
      "lb-to-app"       = { group = aws_security_group.lb.id, port = var.app_port, cidr = null, peer = aws_security_group.app.id, description = "load balancer to spin up" }
      "app-to-redis"    = { group = aws_security_group.app.id, port = var.redis_port, cidr = null, peer = aws_security_group.redis.id, description = "app to Redis (TLS)" }
      "app-to-postgres" = { group = aws_security_group.app.id, port = var.postgres_port, cidr = null, peer = aws_security_group.postgres.id, description = "app to Postgres (TLS)" }
    },
    {
      for c in var.app_egress_cidrs :
      "app-https-${c}" => { group = aws_security_group.app.id, port = 443, cidr = c, peer = null, description = "packages, Spin, the artifact, Secrets Manager" }
    },
  )
}

resource "aws_vpc_security_group_ingress_rule" "this" {
  for_each                     = local.ingress_rules
  security_group_id            = each.value.group
  description                  = each.value.description
  ip_protocol                  = "tcp"
  from_port                    = each.value.port
  to_port                      = each.value.port
  cidr_ipv4                    = each.value.cidr
  referenced_security_group_id = each.value.peer
  prefix_list_id               = each.value.prefix_list
}

resource "aws_vpc_security_group_egress_rule" "this" {
  for_each                     = local.egress_rules
  security_group_id            = each.value.group
  description                  = each.value.description
  ip_protocol                  = "tcp"
  from_port                    = each.value.port
  to_port                      = each.value.port
  cidr_ipv4                    = each.value.cidr
  referenced_security_group_id = each.value.peer
}

output "app_url" {
  description = "Where the app answers (point your DNS name at load_balancer_dns_name for the certificate's name)."
  value       = "${local.https ? "https" : "http"}://${aws_lb.app.dns_name}"
}

output "load_balancer_dns_name" {
  description = "The ALB's DNS name (CNAME or alias target)."
  value       = aws_lb.app.dns_name
}

output "manifest" {
  description = "The manifest the instances run: spin.toml, with the cron trigger (the drain every second)."
  value       = "spin.toml"
}

output "redis_engine" {
  description = "memorydb (durable transaction log) or elasticache (asynchronous replicas)."
  value       = var.redis_engine
}

output "redis_endpoints" {
  description = "The Redis nodes (host:port), in redis_url order."
  value       = [for e in local.redis_endpoints : "${e.host}:${e.port}"]
}

output "postgres_endpoint" {
  description = "The RDS endpoint (host:port)."
  value       = "${aws_db_instance.postgres.address}:${var.postgres_port}"
}

output "spin_variables" {
  description = "The non-secret Spin variables the instances get in the clear (redis_origin = rediss://host:port, pg_host, payment_api_url, and settings: the load balancer's subnets as trusted_proxies, and any setting given)."
  value       = local.spin_public_variables
}

output "spin_secret_arns" {
  description = "Secrets Manager ARN of each secret Spin variable (read by the instances at start); payment_api_key only when it is set."
  value       = { for k, s in aws_secretsmanager_secret.spin : k => s.arn }
}

output "spin_environment" {
  description = "Every Spin variable as SPIN_VARIABLE_<NAME> (e.g. to run `spin up` against this footprint from a bastion)."
  value       = merge(module.app_variables.environment, { for k, v in local.spin_public_variables : "SPIN_VARIABLE_${upper(k)}" => v })
  sensitive   = true
}

output "allowed_outbound_hosts" {
  description = "What the manifest's allowed_outbound_hosts entries resolve to: redis_origin (\"{{ redis_origin }}\", one entry for every Redis node), \"postgres://{{ pg_host }}\" and the payment provider's API (\"{{ payment_api_url }}\")."
  value       = module.app_variables.allowed_outbound_hosts
}

output "autoscaling_group_name" {
  description = "The main instances' Auto Scaling group (start an instance refresh here to roll)."
  value       = aws_autoscaling_group.app.name
}

output "critical_autoscaling_group_name" {
  description = "The Auto Scaling group reserved for the critical routes (same launch template; roll it with the main one)."
  value       = aws_autoscaling_group.critical.name
}

output "critical_routes" {
  description = "The critical (route, method) pairs of spin.toml that the load balancer sends to the reserved group (method \"*\": every method the route's entry does not name)."
  value       = module.request_classes.critical_pairs
}

output "vpc_id" {
  description = "The VPC."
  value       = aws_vpc.main.id
}

output "private_subnet_ids" {
  description = "Private subnets (instances, Redis, Postgres)."
  value       = [for s in aws_subnet.private : s.id]
}

output "public_subnet_ids" {
  description = "Public subnets (ALB, NAT)."
  value       = [for s in aws_subnet.public : s.id]
}

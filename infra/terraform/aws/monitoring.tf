# The alerts of ../../prometheus/seckill.rules.yml, their one home. With prometheus_workspace, an
# Amazon Managed Prometheus workspace evaluates them as they are (and, with alarm_topic_arn, its
# alert manager sends them to SNS); what it evaluates is what a scraper writes into it (DEPLOY.md,
# "Alerts"). MemoryDB exports no redis_exporter counters: its CPU is CloudWatch's
# EngineCPUUtilization, so SeckillRedisCpuHigh is also a CloudWatch alarm per node, with the
# rule's threshold, duration and runbook read from the same file.

locals {
  alert_rules_yaml = file("${path.module}/../../prometheus/seckill.rules.yml")
  alert_rules      = { for r in yamldecode(local.alert_rules_yaml).groups[0].rules : r.alert => r }
  redis_cpu_rule   = local.alert_rules["SeckillRedisCpuHigh"]
  # "… > 0.8": a share of one core; CloudWatch's EngineCPUUtilization is a percentage.
  redis_cpu_percent = tonumber(regex(">\\s*([0-9.]+)\\s*$", trimspace(local.redis_cpu_rule.expr))[0]) * 100
  redis_cpu_seconds = tonumber(trimsuffix(local.redis_cpu_rule["for"], "m")) * 60
  alarm_actions     = var.alarm_topic_arn == null ? [] : [var.alarm_topic_arn]
}

resource "aws_cloudwatch_metric_alarm" "redis_cpu" {
  count               = local.memorydb ? var.redis_nodes : 0
  alarm_name          = "${var.name}-redis-${count.index}-cpu"
  alarm_description   = "SeckillRedisCpuHigh: ${local.redis_cpu_rule.annotations.runbook}"
  namespace           = "AWS/MemoryDB"
  metric_name         = "EngineCPUUtilization"
  dimensions          = { ClusterName = aws_memorydb_cluster.redis[count.index].name }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = local.redis_cpu_seconds / 60
  comparison_operator = "GreaterThanThreshold"
  threshold           = local.redis_cpu_percent
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
}

resource "aws_prometheus_workspace" "alerts" {
  count = var.prometheus_workspace ? 1 : 0
  alias = "${var.name}-alerts"
}

resource "aws_prometheus_rule_group_namespace" "seckill" {
  count        = var.prometheus_workspace ? 1 : 0
  name         = "seckill"
  workspace_id = aws_prometheus_workspace.alerts[0].id
  data         = local.alert_rules_yaml
}

resource "aws_prometheus_alert_manager_definition" "sns" {
  count        = var.prometheus_workspace && var.alarm_topic_arn != null ? 1 : 0
  workspace_id = aws_prometheus_workspace.alerts[0].id
  definition = yamlencode({
    alertmanager_config = {
      route = { receiver = "sns", group_by = ["alertname", "event"] }
      receivers = [{
        name        = "sns"
        sns_configs = [{ topic_arn = var.alarm_topic_arn, sigv4 = { region = var.region } }]
      }]
    }
  })
}

# Redis: var.redis_nodes independent nodes, each event wholly on one of them (the app spreads
# events over the comma-separated redis_url list). Spin's Redis client speaks neither the cluster
# protocol nor follows MOVED, so every node here is a ONE-shard cluster (or a cluster-mode-
# disabled replication group) reached through one endpoint, never a multi-shard cluster.
#
# MemoryDB (default). Every write is committed to a multi-AZ transaction log before Redis
# answers, so an order the buy script accepted survives the loss of its node: "an accepted order
# is never lost" holds. Replicas default to 0: the log, not a replica, gives the durability, and
# the cluster endpoint could hand a non-cluster client a replica, which answers MOVED.
#
# ElastiCache (redis_engine = "elasticache"): a replication group with TLS in transit and an
# AUTH token. Its replication is ASYNCHRONOUS: a failover promotes a replica that may not have
# received the last writes, so buys that were answered "accepted" can vanish from Redis (the
# unit goes back to stock, the order intent is gone before the drain moved it to Postgres).
# Choose it only if that risk is accepted; DEPLOY.md says the same.

locals {
  memorydb        = var.redis_engine == "memorydb"
  redis_node_type = var.redis_node_type != null ? var.redis_node_type : (local.memorydb ? "db.r7g.large" : "cache.r7g.large")
  # The user the app connects as: MemoryDB's ACL user, or ElastiCache's default user (AUTH token).
  memorydb_user = var.redis_username != null ? var.redis_username : "${var.name}-app"
  redis_user    = local.memorydb ? local.memorydb_user : "default"

  # The commands the app runs, the one list of them: its Lua scripts' redis.call/pcall commands
  # (crates/domain/lua/; an ACL applies inside a script too) and what the Rust sends itself (EVALSHA,
  # EVAL when a script is not cached, PING for health). AUTH needs no rule; redis-rs ignores a
  # refused CLIENT SETINFO. tests/terraform/check_redis_acl.py fails when the code runs a command
  # not here, or when one here is no longer run.
  redis_app_commands = [
    "del", "eval", "evalsha", "exists", "get", "hdel", "hexists", "hget", "hgetall", "hincrby", "hmget",
    "hscan", "hset", "hsetnx", "hvals", "incr", "incrby", "pexpire", "ping", "pttl", "sadd",
    "scard", "set", "sismember", "smembers", "spop", "srem", "time", "xack", "xadd", "xautoclaim",
    "xgroup", "xinfo", "xlen", "xpending", "xrange", "xreadgroup", "xtrim",
  ]
  # MemoryDB's ACL user: every key, no channel, those commands and no other.
  redis_acl_access_string = "on ~* -@all ${join(" ", [for c in local.redis_app_commands : "+${c}"])}"

  redis_endpoints = local.memorydb ? [
    for c in aws_memorydb_cluster.redis : { host = c.cluster_endpoint[0].address, port = c.cluster_endpoint[0].port }
    ] : [
    for g in aws_elasticache_replication_group.redis : { host = g.primary_endpoint_address, port = var.redis_port }
  ]
  # Several nodes need one host:port pattern that covers them all (redis_origin: rediss:// and it).
  redis_host_pattern = var.redis_host_pattern != null ? var.redis_host_pattern : (
    var.redis_nodes == 1 ? null : (
      local.memorydb ? "*.memorydb.${var.region}.amazonaws.com:${var.redis_port}" : "*.cache.amazonaws.com:${var.redis_port}"
    )
  )
}

# --- MemoryDB -----------------------------------------------------------------------------------

resource "aws_memorydb_subnet_group" "redis" {
  count      = local.memorydb ? 1 : 0
  name       = "${var.name}-redis"
  subnet_ids = [for s in aws_subnet.private : s.id]
}

resource "aws_memorydb_user" "app" {
  count         = local.memorydb ? 1 : 0
  user_name     = local.memorydb_user
  access_string = local.redis_acl_access_string

  authentication_mode {
    type      = "password"
    passwords = [var.redis_password]
  }
}

resource "aws_memorydb_acl" "app" {
  count      = local.memorydb ? 1 : 0
  name       = "${var.name}-app"
  user_names = [aws_memorydb_user.app[0].user_name]
}

resource "aws_memorydb_cluster" "redis" {
  count                      = local.memorydb ? var.redis_nodes : 0
  name                       = "${var.name}-redis-${count.index}"
  description                = "seckill Redis node ${count.index}"
  engine                     = var.redis_engine_family
  engine_version             = var.redis_engine_version
  node_type                  = local.redis_node_type
  num_shards                 = 1
  num_replicas_per_shard     = var.memorydb_replicas_per_shard
  port                       = var.redis_port
  tls_enabled                = true
  acl_name                   = aws_memorydb_acl.app[0].name
  subnet_group_name          = aws_memorydb_subnet_group.redis[0].name
  security_group_ids         = [aws_security_group.redis.id]
  snapshot_retention_limit   = var.redis_snapshot_retention_days
  auto_minor_version_upgrade = true
}

# --- ElastiCache --------------------------------------------------------------------------------

resource "aws_elasticache_subnet_group" "redis" {
  count      = local.memorydb ? 0 : 1
  name       = "${var.name}-redis"
  subnet_ids = [for s in aws_subnet.private : s.id]
}

resource "aws_elasticache_replication_group" "redis" {
  count                = local.memorydb ? 0 : var.redis_nodes
  replication_group_id = "${var.name}-redis-${count.index}"
  description          = "seckill Redis node ${count.index} (asynchronous replicas: a failover can lose acknowledged writes)"
  engine               = var.redis_engine_family
  engine_version       = var.redis_engine_version
  node_type            = local.redis_node_type
  port                 = var.redis_port
  cluster_mode         = "disabled"
  num_cache_clusters   = 1 + var.elasticache_replicas
  # With a replica the primary endpoint follows a failover to another zone.
  automatic_failover_enabled = var.elasticache_replicas > 0
  multi_az_enabled           = var.elasticache_replicas > 0
  transit_encryption_enabled = true
  transit_encryption_mode    = "required"
  auth_token                 = var.redis_password
  at_rest_encryption_enabled = true
  subnet_group_name          = aws_elasticache_subnet_group.redis[0].name
  security_group_ids         = [aws_security_group.redis.id]
  snapshot_retention_limit   = var.redis_snapshot_retention_days
  auto_minor_version_upgrade = true
}

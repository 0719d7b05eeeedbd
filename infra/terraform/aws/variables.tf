# ---------------------------------------------------------------------------------------------
# General
# ---------------------------------------------------------------------------------------------

variable "name" {
  description = "Prefix of every resource name (lower case letters, digits, hyphens)."
  type        = string
  default     = "seckill"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,19}$", var.name))
    error_message = "name: 2 to 20 characters, lower case letters, digits and hyphens, starting with a letter (it prefixes MemoryDB, RDS and ALB names, which are short)."
  }
}

variable "region" {
  description = "The AWS region."
  type        = string
  default     = "us-east-1"
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}

variable "offline_checks" {
  description = "Skip the provider's credential, account, metadata and region checks: for `plan` and `terraform test` without an AWS account. Leave false for real deployments."
  type        = bool
  default     = false
}

# ---------------------------------------------------------------------------------------------
# Network
# ---------------------------------------------------------------------------------------------

variable "availability_zones" {
  description = "The zones to spread subnets over (at least two: RDS Multi-AZ and the ALB need them). Default: <region>a and <region>b."
  type        = list(string)
  default     = null
  validation {
    condition     = var.availability_zones == null ? true : length(var.availability_zones) >= 2
    error_message = "Give at least two availability zones."
  }
}

variable "vpc_cidr" {
  description = "The VPC's IPv4 range."
  type        = string
  default     = "10.40.0.0/16"
  validation {
    condition     = can(cidrnetmask(var.vpc_cidr))
    error_message = "vpc_cidr must be an IPv4 CIDR block, e.g. 10.40.0.0/16."
  }
}

variable "public_subnet_cidrs" {
  description = "One range per zone for the public subnets (ALB, NAT). Default: /24s carved from vpc_cidr."
  type        = list(string)
  default     = null
  validation {
    condition = var.public_subnet_cidrs == null ? true : (
      alltrue([for c in var.public_subnet_cidrs : can(cidrnetmask(c))]) &&
      length(var.public_subnet_cidrs) == length(coalesce(var.availability_zones, ["a", "b"]))
    )
    error_message = "public_subnet_cidrs: one IPv4 CIDR block per availability zone."
  }
}

variable "private_subnet_cidrs" {
  description = "One range per zone for the private subnets (instances, Redis, Postgres). Default: /20s carved from vpc_cidr."
  type        = list(string)
  default     = null
  validation {
    condition = var.private_subnet_cidrs == null ? true : (
      alltrue([for c in var.private_subnet_cidrs : can(cidrnetmask(c))]) &&
      length(var.private_subnet_cidrs) == length(coalesce(var.availability_zones, ["a", "b"]))
    )
    error_message = "private_subnet_cidrs: one IPv4 CIDR block per availability zone."
  }
}

variable "nat_gateways" {
  description = "\"single\": one NAT gateway for all zones (the instances need the internet only at boot: packages, Spin, the app artifact, Secrets Manager); \"per_zone\": one per zone, so a zone outage never blocks booting instances elsewhere."
  type        = string
  default     = "single"
  validation {
    condition     = contains(["single", "per_zone"], var.nat_gateways)
    error_message = "nat_gateways is \"single\" or \"per_zone\"."
  }
}

# ---------------------------------------------------------------------------------------------
# Redis
# ---------------------------------------------------------------------------------------------

variable "redis_engine" {
  description = "\"memorydb\" (default: a durable multi-AZ transaction log, an acknowledged write survives a node loss) or \"elasticache\" (replication group: asynchronous replicas, a failover can lose acknowledged writes, i.e. accepted orders)."
  type        = string
  default     = "memorydb"
  validation {
    condition     = contains(["memorydb", "elasticache"], var.redis_engine)
    error_message = "redis_engine is \"memorydb\" or \"elasticache\"."
  }
}

variable "redis_nodes" {
  description = "How many independent Redis nodes (each a one-shard cluster or replication group). Each event's stock shards are dealt out evenly over the comma-separated redis_url list (ARCHITECTURE.md, shards)."
  type        = number
  default     = 1
  validation {
    condition     = var.redis_nodes >= 1 && var.redis_nodes <= 16 && floor(var.redis_nodes) == var.redis_nodes
    error_message = "redis_nodes: a whole number from 1 to 16."
  }
}

variable "redis_node_type" {
  description = "Node type. Default: db.r7g.large (MemoryDB) or cache.r7g.large (ElastiCache)."
  type        = string
  default     = null
}

variable "redis_engine_family" {
  description = "\"redis\" or \"valkey\" (both MemoryDB and ElastiCache offer either)."
  type        = string
  default     = "redis"
  validation {
    condition     = contains(["redis", "valkey"], var.redis_engine_family)
    error_message = "redis_engine_family is \"redis\" or \"valkey\"."
  }
}

variable "redis_engine_version" {
  description = "Engine version (the app needs Lua scripting and streams: 6.2 or newer)."
  type        = string
  default     = "7.1"
}

variable "redis_port" {
  description = "Redis port."
  type        = number
  default     = 6379
}

variable "memorydb_replicas_per_shard" {
  description = "MemoryDB replicas per shard. 0 by default: the transaction log already makes writes durable across zones (a lost node is replaced and replays the log: minutes without that node, no accepted order lost). Spin's Redis client does not follow the cluster protocol, and a replica answers MOVED to a client that the cluster endpoint sent to it; raise this only with that in mind."
  type        = number
  default     = 0
  validation {
    condition     = var.memorydb_replicas_per_shard >= 0 && var.memorydb_replicas_per_shard <= 5
    error_message = "memorydb_replicas_per_shard: 0 to 5."
  }
}

variable "elasticache_replicas" {
  description = "ElastiCache replicas per node (1 or more enables automatic failover and Multi-AZ; the primary endpoint follows the failover). Replication is asynchronous."
  type        = number
  default     = 1
  validation {
    condition     = var.elasticache_replicas >= 0 && var.elasticache_replicas <= 5
    error_message = "elasticache_replicas: 0 to 5."
  }
}

variable "redis_username" {
  description = "The MemoryDB ACL user the app connects as (user names are unique per account and region). Default: <name>-app. ElastiCache with an AUTH token always uses \"default\"."
  type        = string
  default     = null
  validation {
    condition     = var.redis_username == null ? true : (can(regex("^[a-z][a-z0-9-]{0,39}$", var.redis_username)) && var.redis_username != "default")
    error_message = "redis_username: lower case letters, digits and hyphens, not \"default\"."
  }
}

variable "redis_password" {
  description = "The Redis password (MemoryDB user password or ElastiCache AUTH token): 16 to 128 printable characters without spaces, quotes, slashes or @."
  type        = string
  sensitive   = true
  validation {
    condition     = length(var.redis_password) >= 16 && length(var.redis_password) <= 128 && can(regex("^[!#-.0-?A-~]+$", var.redis_password))
    error_message = "redis_password: 16 to 128 printable ASCII characters, none of space, \", / or @ (what both MemoryDB and ElastiCache accept)."
  }
}

variable "redis_snapshot_retention_days" {
  description = "Daily snapshots kept (0 turns them off)."
  type        = number
  default     = 7
}

variable "redis_host_pattern" {
  description = "With several Redis nodes, the host:port pattern that covers them all, no scheme (redis_origin is rediss:// and this). Default: *.memorydb.<region>.amazonaws.com:<port> or *.cache.amazonaws.com:<port>."
  type        = string
  default     = null
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------------------------

variable "postgres_engine_version" {
  description = "RDS PostgreSQL version (a major version such as \"16\" lets RDS pick the minor)."
  type        = string
  default     = "16"
}

variable "postgres_instance_class" {
  description = "RDS instance class."
  type        = string
  default     = "db.r7g.large"
}

variable "postgres_allocated_storage" {
  description = "Initial storage (GiB)."
  type        = number
  default     = 100
}

variable "postgres_max_allocated_storage" {
  description = "Storage autoscaling ceiling (GiB)."
  type        = number
  default     = 1000
}

variable "postgres_multi_az" {
  description = "A synchronous standby in another zone."
  type        = bool
  default     = true
}

variable "postgres_port" {
  description = "Postgres port."
  type        = number
  default     = 5432
}

variable "postgres_database" {
  description = "Database name."
  type        = string
  default     = "seckill"
}

variable "postgres_username" {
  description = "The master user: it owns the schema and runs the migrations; the app never connects as it."
  type        = string
  default     = "seckill"
}

variable "postgres_app_username" {
  description = "The app's own role, which the migration step keeps (../files/migrate-locked.sh): LOGIN, and SELECT/INSERT/UPDATE/DELETE on the tables and USAGE/SELECT on the sequences, nothing more."
  type        = string
  default     = "seckill_app"
  validation {
    condition     = can(regex("^[a-z_][a-z0-9_]{0,62}$", var.postgres_app_username)) && var.postgres_app_username != var.postgres_username
    error_message = "postgres_app_username: a lower-case SQL identifier (letters, digits, _), not the master user."
  }
}

variable "postgres_app_password" {
  description = "The app role's password (16 to 128 printable characters without /, \", @ or space). The migration step sets it at every start, so changing it and rolling the instances rotates it."
  type        = string
  sensitive   = true
  validation {
    condition     = length(var.postgres_app_password) >= 16 && length(var.postgres_app_password) <= 128 && can(regex("^[!#-.0-?A-~]+$", var.postgres_app_password))
    error_message = "postgres_app_password: 16 to 128 printable ASCII characters, none of space, \", / or @."
  }
}

variable "postgres_password" {
  description = "The master user's password (8 to 128 printable characters without /, \", @ or space: what RDS accepts)."
  type        = string
  sensitive   = true
  validation {
    condition     = length(var.postgres_password) >= 8 && length(var.postgres_password) <= 128 && can(regex("^[!#-.0-?A-~]+$", var.postgres_password))
    error_message = "postgres_password: 8 to 128 printable ASCII characters, none of space, \", / or @."
  }
}

variable "postgres_backup_retention_days" {
  description = "Automated backups kept (days)."
  type        = number
  default     = 7
}

variable "postgres_ca_cert_identifier" {
  description = "The RDS server certificate authority. The instances trust it through rds_ca_bundle_url."
  type        = string
  default     = "rds-ca-rsa2048-g1"
}

variable "rds_ca_bundle_url" {
  description = "Where the instances fetch the RDS CA bundle that goes into their trust store (real Spin verifies Postgres certificates against the system store). Default: the region's bundle on truststore.pki.rds.amazonaws.com."
  type        = string
  default     = null
}

variable "deletion_protection" {
  description = "Protect the database (and keep a final snapshot) against `terraform destroy`."
  type        = bool
  default     = true
}

# ---------------------------------------------------------------------------------------------
# The app
# ---------------------------------------------------------------------------------------------

variable "ami_id" {
  description = "The instances' image: Amazon Linux 2023 or Debian/Ubuntu, matching instance_arch (no data source looks it up, so plans run offline)."
  type        = string
  validation {
    condition     = can(regex("^ami-[0-9a-f]{8,17}$", var.ami_id))
    error_message = "ami_id must look like ami-0123456789abcdef0."
  }
}

variable "runtime" {
  description = "What runs the app on the instances. \"spin\" (default): `spin up -f spin.toml` with the cron plugin, the reference runtime. \"seckill-host\": our wasmtime host (host) under ../files/seckill-host.service, from the release tarball of scripts/release.sh given as app_artifact_url (built for instance_arch): pooled Redis connections, every variable resolved once at start, graceful shutdown, optional metrics. Both run the same .wasm files and spin.toml with the same variables; changing it rolls the instances."
  type        = string
  default     = "spin"
  validation {
    condition     = contains(["spin", "seckill-host"], var.runtime)
    error_message = "runtime is \"spin\" or \"seckill-host\"."
  }
}

variable "metrics_listen" {
  description = "runtime = \"seckill-host\" only: where the host serves Prometheus metrics (`--metrics-listen`, IP:port; 0.0.0.0:9090 to scrape from metrics_ingress_cidrs, 127.0.0.1:9090 for an agent on the instance). Null (default): no metrics endpoint."
  type        = string
  default     = null
  validation {
    condition     = var.metrics_listen == null || (var.runtime == "seckill-host" && can(regex("^([0-9]{1,3}(\\.[0-9]{1,3}){3}|\\[[0-9A-Fa-f:.]+\\]):[0-9]{1,5}$", var.metrics_listen)))
    error_message = "metrics_listen is an IP:port (e.g. 0.0.0.0:9090 or [::]:9090), and only with runtime = \"seckill-host\" (spin up serves no metrics)."
  }
}

variable "metrics_ingress_cidrs" {
  description = "Who may reach the metrics port (metrics_listen's) on the instances, e.g. your Prometheus' range. Default: nobody (no rule)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.metrics_ingress_cidrs : can(cidrnetmask(c))]) && (length(var.metrics_ingress_cidrs) == 0 || var.metrics_listen != null)
    error_message = "metrics_ingress_cidrs: IPv4 CIDR blocks, and only with metrics_listen set."
  }
}

variable "instance_type" {
  description = "EC2 instance type of the app's hosts."
  type        = string
  default     = "c7i.large"
}

variable "instance_arch" {
  description = "\"amd64\" or \"aarch64\": which Spin build to install (must match instance_type and ami_id; with runtime = \"seckill-host\", the artifact's bin/seckill-host must be built for it)."
  type        = string
  default     = "amd64"
  validation {
    condition     = contains(["amd64", "aarch64"], var.instance_arch)
    error_message = "instance_arch is \"amd64\" or \"aarch64\"."
  }
}

variable "instances" {
  description = "The main Auto Scaling group's sizes, scaled on CPU between min and max (every route but the critical ones, which have critical_instances)."
  type = object({
    min     = number
    desired = number
    max     = number
  })
  default = { min = 2, desired = 2, max = 6 }
  validation {
    condition     = var.instances.min >= 1 && var.instances.min <= var.instances.desired && var.instances.desired <= var.instances.max
    error_message = "instances: 1 <= min <= desired <= max."
  }
}

variable "critical_instances" {
  description = "Instances reserved for the critical routes (the manifest's request classes: the payment provider's webhook, the job routes, operators' writes): a second Auto Scaling group of the same launch template, fixed at this size, with a target group of its own to which the load balancer sends every critical (route, method) pair; everything else goes to the main group (`instances`). 2 by default, spread over the zones: one instance's loss or refresh leaves the other."
  type        = number
  default     = 2
  validation {
    condition     = var.critical_instances >= 1 && var.critical_instances <= 10 && floor(var.critical_instances) == var.critical_instances
    error_message = "critical_instances: a whole number from 1 to 10 (the critical routes carry webhooks, jobs and operators, not the sale's crowd)."
  }
}

variable "cpu_target_percent" {
  description = "Target-tracking scaling on average CPU."
  type        = number
  default     = 60
}

variable "app_port" {
  description = "Where the runtime (`spin up` or seckill-host) listens on each instance."
  type        = number
  default     = 3000
}

variable "health_check_path" {
  description = "The ALB's target check, for both groups. /.well-known/spin/health (default) is answered by Spin before routing, without an instance of the app (Spin crates/trigger-http/src/server.rs, `handle`), and by seckill-host likewise: neither a full instance pool nor the host shedding buyer reads under overload fails it, so the load balancer does not pull a busy instance (moving its load onto the others) nor the group replace it; it touches neither Redis nor Postgres, so a managed-service outage does not either. /api/health checks both through the app (an instance per check, shed with the reads)."
  type        = string
  default     = "/.well-known/spin/health"
  validation {
    condition     = can(regex("^/[!-~]*$", var.health_check_path)) && length(var.health_check_path) <= 1024
    error_message = "health_check_path: a path starting with /, printable ASCII, at most 1024 characters."
  }
}

variable "spin_version" {
  description = "The Spin release installed on the instances."
  type        = string
  default     = "v3.6.3"
}

variable "spin_download_url" {
  description = "Override the Spin release tarball URL. Default: the spinframework/spin GitHub release for spin_version and instance_arch."
  type        = string
  default     = null
}

variable "spin_sha256" {
  description = "runtime = \"spin\": the Spin tarball's SHA-256 (required; the boot refuses any other tarball). Spin's release page lists it."
  type        = string
  default     = null
  validation {
    condition     = var.runtime != "spin" || can(regex("^[0-9a-f]{64}$", coalesce(var.spin_sha256, "-")))
    error_message = "spin_sha256: the Spin tarball's SHA-256 (64 lower-case hex digits), required with runtime = \"spin\"."
  }
}

variable "cron_plugin" {
  description = "The spin-trigger-cron release the instances install (spin.toml's [[trigger.cron]] runs only with it): a tagged release of spinframework/spin-trigger-plugins and the SHA-256 of its linux tarball per instance_arch, as its manifest in spinframework/spin-plugins (manifests/trigger-cron/) lists them. The boot checks the tarball and installs it from the local file."
  type = object({
    version = string
    sha256  = map(string)
  })
  default = {
    version = "0.6.2"
    sha256 = {
      amd64   = "267f848faefa8352b5d94e7ca274bc6a2bec39497c0f0661c529b9cc37aa946a"
      aarch64 = "4d461befebb4049dbe6c676290ba0eaf193527c2dbbcee4f2d56ad8309a56faf"
    }
  }
  validation {
    condition     = can(regex("^[0-9]+[.][0-9]+[.][0-9]+$", var.cron_plugin.version)) && alltrue([for a in ["amd64", "aarch64"] : can(regex("^[0-9a-f]{64}$", lookup(var.cron_plugin.sha256, a, "")))])
    error_message = "cron_plugin: a release version (x.y.z, no canary) and the SHA-256 of its amd64 and aarch64 linux tarballs."
  }
}

variable "app_artifact_url" {
  description = "The built app: a .tar.gz holding spin.toml, the .wasm files it names and migrations/ (DEPLOY.md shows how to make it), at an https:// or s3:// URL; with runtime = \"seckill-host\", the release tarball of scripts/release.sh (bin/seckill-host, wasm/, spin.toml, migrations/), which `spin up` runs too. Changing it rolls the instances."
  type        = string
  validation {
    condition     = can(regex("^(https://|s3://[a-z0-9][a-z0-9.-]+/).+", var.app_artifact_url))
    error_message = "app_artifact_url must be an https:// or s3://bucket/key URL."
  }
}

variable "app_artifact_sha256" {
  description = "The artifact's SHA-256 (sha256sum of the tarball): required; the boot refuses any other file."
  type        = string
  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.app_artifact_sha256))
    error_message = "app_artifact_sha256: the artifact's SHA-256, 64 lower-case hex digits."
  }
}

variable "settings" {
  description = "Optional settings of the app over their defaults, by name: drain_batch, drain_max_batches, drain_lease_ms, drain_reclaim_idle_ms, drain_max_deliveries, release_batch (whole numbers), demo_login (\"false\"; \"true\" only with demo_environment), payment_mode (\"test\" or \"live\": the provider's mode payments are taken in). Passed in the clear as the one Spin variable `settings` of spin.toml, the pairs joined by commas in name order (\"drain_batch=1000,release_batch=500,trusted_proxies=10.40.0.0/24 10.40.1.0/24\"), with trusted_proxies (the public subnets, where the load balancer is) set by this configuration, as are the connection variables and the secrets."
  type        = map(string)
  default     = {}
  validation {
    # The names and what each accepts: modules/app-variables (setting_patterns), the one list.
    condition     = alltrue([for k, v in var.settings : can(regex(module.app_variables.setting_patterns[k], v))])
    error_message = "settings: each name is one of ${join(", ", keys(module.app_variables.setting_patterns))}; demo_login is \"false\" (\"true\" only with demo_environment = true), payment_mode \"test\" or \"live\", admission_ipv6_prefix 1 to 128, the others whole numbers (0 to 999999999). Refused: ${join(", ", [for k, v in var.settings : "${k}=${v}" if !can(regex(module.app_variables.setting_patterns[k], v))])}."
  }
}

variable "ssm_access" {
  description = "Attach AmazonSSMManagedInstanceCore to the instance role: shell access through Session Manager, no SSH port."
  type        = bool
  default     = true
}

variable "root_device_name" {
  description = "The AMI's root device (Amazon Linux and Debian: /dev/xvda; Ubuntu: /dev/sda1)."
  type        = string
  default     = "/dev/xvda"
}

variable "root_volume_gib" {
  description = "Instance root volume size."
  type        = number
  default     = 20
}

# ---------------------------------------------------------------------------------------------
# Load balancer
# ---------------------------------------------------------------------------------------------

variable "certificate_arn" {
  description = "ACM certificate (in var.region) for the load balancer's HTTPS listener: HTTPS on 443, and HTTP on 80 redirects to it. Required unless allow_plain_http = true."
  type        = string
  default     = null
  validation {
    condition     = var.certificate_arn != null || var.allow_plain_http
    error_message = "certificate_arn is required: without it the load balancer serves plain HTTP, and JWTs, operators' tokens and payment webhooks cross the network in the clear. Give an ACM certificate, or set allow_plain_http = true for a trial that carries nothing of value."
  }
}

variable "allow_plain_http" {
  description = "Serve plain HTTP on port 80 when no certificate_arn is given (a first try; never a real sale). False: a certificate is required."
  type        = bool
  default     = false
}

variable "ssl_policy" {
  description = "The HTTPS listener's TLS policy."
  type        = string
  default     = "ELBSecurityPolicy-TLS13-1-2-2021-06"
}

variable "lb_ingress_cidrs" {
  description = "Who may reach the load balancer's listeners (the only ingress open beyond the VPC)."
  type        = list(string)
  default     = ["0.0.0.0/0"]
  validation {
    condition     = alltrue([for c in var.lb_ingress_cidrs : can(cidrnetmask(c))])
    error_message = "lb_ingress_cidrs: IPv4 CIDR blocks."
  }
}

variable "operator_cidrs" {
  description = "Address ranges (CIDR, IPv4 or IPv6) from which /admin/* and /console are reachable; from any other address the load balancer answers them 403. Empty: no restriction beyond the operators' tokens. The critical routes' rules under /admin/* carry these ranges too, so the plan fails when the load balancer's rules would exceed ALB's 100: give a few wide ranges."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.operator_cidrs : can(cidrhost(c, 0))]) && length(var.operator_cidrs) <= 90
    error_message = "operator_cidrs: at most 90 CIDR blocks (3 to a listener rule, 100 rules to a listener)."
  }
}

variable "web_acl_arn" {
  description = "A WAFv2 web ACL to put in front of the app (null: none). With cdn, a global one (scope CLOUDFRONT, made in us-east-1) on the distribution, whose rules see each viewer's own address; without, a regional one in `region` on the load balancer. Where a rate limit per client address keeps a forged flood of the public critical routes (the webhook, the admin routes) off their reserved instances (DEPLOY.md, \"At overload\")."
  type        = string
  default     = null
  validation {
    condition     = var.web_acl_arn == null || can(regex(var.cdn ? "^arn:aws[a-z-]*:wafv2:us-east-1:[0-9]{12}:global/webacl/[^/]+/[^/]+$" : "^arn:aws[a-z-]*:wafv2:[a-z0-9-]+:[0-9]{12}:regional/webacl/[^/]+/[^/]+$", coalesce(var.web_acl_arn, "-")))
    error_message = "web_acl_arn: a WAFv2 web ACL's ARN, global (arn:aws:wafv2:us-east-1:<account>:global/webacl/<name>/<id>) with cdn, regional in the load balancer's region without."
  }
}

variable "app_egress_cidrs" {
  description = "Where the instances may open HTTPS connections on 443 (packages, Spin, the artifact, Secrets Manager, the payment provider's API: payment_api_url)."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "lb_internal" {
  description = "An internal load balancer (behind a CDN or another proxy in the VPC)."
  type        = bool
  default     = false
}

variable "lb_idle_timeout" {
  description = "ALB idle timeout (seconds): above the longest admin job request (POST /admin/jobs/*?for_ms=...)."
  type        = number
  default     = 90
}

# ---------------------------------------------------------------------------------------------
# Secrets
# ---------------------------------------------------------------------------------------------

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
  description = "The bearer token of a scheduler that calls the job routes over HTTP (the instances run the jobs from the cron trigger and need none): added to operators as scheduler:scheduler:<token>, a role that runs the job routes (/admin/jobs/*) and nothing else. Null (the default): no such entry."
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
  description = "The payment provider's API origin (Stripe's by default), passed in the clear as the Spin variable payment_api_url: also the whole allowed_outbound_hosts entry \"{{ payment_api_url }}\" of the pay, jobs and timeout-release components. The instances reach it through app_egress_cidrs on port 443."
  type        = string
  default     = "https://api.stripe.com"
  validation {
    condition     = can(regex("^https://[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:443)?$", var.payment_api_url))
    error_message = "payment_api_url: an https:// origin on port 443 (the instances' security group opens HTTPS out on 443 only), without a path or a trailing slash (https://api.stripe.com)."
  }
}

variable "secrets_kms_key_id" {
  description = "KMS key for the Secrets Manager secrets (null: the account's aws/secretsmanager key)."
  type        = string
  default     = null
}

variable "secret_recovery_window_days" {
  description = "Days a deleted secret can be restored (0 deletes at once, 7 to 30 otherwise)."
  type        = number
  default     = 7
  validation {
    condition     = var.secret_recovery_window_days == 0 || (var.secret_recovery_window_days >= 7 && var.secret_recovery_window_days <= 30)
    error_message = "secret_recovery_window_days is 0 or from 7 to 30."
  }
}

# ---------------------------------------------------------------------------------------------
# CDN (CloudFront in front of the load balancer)
# ---------------------------------------------------------------------------------------------

variable "cdn" {
  description = "CloudFront in front of the load balancer (cdn.tf): the shop's pages and event reads cached as the app's Cache-Control says, the API, admin and console passed through uncached, and the load balancer open to CloudFront only."
  type        = bool
  default     = true
}

variable "cdn_origin_domain_name" {
  description = "With a certificate_arn: the DNS name CloudFront connects to over HTTPS, one the certificate covers and that resolves to the load balancer (e.g. origin.shop.example.com, a CNAME or alias of load_balancer_dns_name). Without a certificate (allow_plain_http) CloudFront reaches the load balancer's own name over HTTP."
  type        = string
  default     = null
  validation {
    condition     = var.cdn_origin_domain_name == null || can(regex("^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$", coalesce(var.cdn_origin_domain_name, "-")))
    error_message = "cdn_origin_domain_name: a DNS name, lower case, no scheme or port."
  }
}

variable "cdn_aliases" {
  description = "The shop's own names on the distribution (e.g. [\"shop.example.com\"]), with cdn_certificate_arn. Empty: the distribution's *.cloudfront.net name and certificate."
  type        = list(string)
  default     = []
}

variable "cdn_certificate_arn" {
  description = "An ACM certificate in us-east-1 (CloudFront's region) covering cdn_aliases."
  type        = string
  default     = null
  validation {
    condition     = (var.cdn_certificate_arn == null) == (length(var.cdn_aliases) == 0)
    error_message = "cdn_aliases and cdn_certificate_arn go together (a us-east-1 ACM certificate covering every alias)."
  }
}

variable "cdn_price_class" {
  description = "CloudFront's price class (which edge locations serve the shop)."
  type        = string
  default     = "PriceClass_100"
}

variable "cloudfront_prefix_list_id" {
  description = "The id of the AWS-managed prefix list com.amazonaws.global.cloudfront.origin-facing in var.region: the only sources the load balancer admits with cdn = true. Null: looked up (a data source, so `plan` then needs credentials)."
  type        = string
  default     = null
}

# ---------------------------------------------------------------------------------------------
# Alerts
# ---------------------------------------------------------------------------------------------

variable "prometheus_workspace" {
  description = "An Amazon Managed Prometheus workspace loaded with ../../prometheus/seckill.rules.yml (the alerts and their runbooks). Off by default: the rules alert on what is scraped into the workspace (the hosts' metrics and GET /admin/metrics, DEPLOY.md), which this root does not set up; turn it on with that scraper."
  type        = bool
  default     = false
}

variable "alarm_topic_arn" {
  description = "An SNS topic for the alerts: the Redis CPU alarm's actions and, with prometheus_workspace, the workspace's alert manager. Null: the alarms show in CloudWatch and the alerts in the workspace, and nobody is notified."
  type        = string
  default     = null
}

variable "cdn_origin_secret" {
  description = "With cdn = true (required then): the value CloudFront sends in the X-Seckill-Origin header and the load balancer requires, so only this distribution reaches the app (the prefix list admits every CloudFront distribution). 32 to 128 letters, digits, - or _."
  type        = string
  default     = null
  sensitive   = true
  validation {
    condition     = var.cdn_origin_secret == null ? !var.cdn : can(regex("^[A-Za-z0-9_-]{32,128}$", var.cdn_origin_secret))
    error_message = "cdn_origin_secret: 32 to 128 letters, digits, - or _; required with cdn = true."
  }
}

# --- Cluster ----------------------------------------------------------------------------------

variable "kubeconfig_path" {
  description = "The kubeconfig of a cluster with the SpinKube operator, its CRDs and containerd-shim-spin installed."
  type        = string
  default     = "~/.kube/config"
}

variable "kube_context" {
  description = "The kubeconfig context (null: the current one)."
  type        = string
  default     = null
}

variable "namespace" {
  description = "The namespace (created by this root)."
  type        = string
  default     = "seckill"
}

# --- The app ----------------------------------------------------------------------------------

variable "app_name" {
  description = "The main SpinApp's name (also its Service's and its HTTPRoute's); the critical routes' SpinApp is <app_name>-critical."
  type        = string
  default     = "seckill"
}

variable "image" {
  description = "The app's OCI reference, pushed from the cron-free manifest: spin registry push -f spin.http.toml <ref>."
  type        = string
  validation {
    condition     = length(var.image) > 0 && !strcontains(var.image, " ")
    error_message = "image is an OCI reference such as ghcr.io/acme/seckill:0.1.0."
  }
}

variable "executor" {
  description = "The SpinAppExecutor (installed with SpinKube)."
  type        = string
  default     = "containerd-shim-spin"
}

variable "replicas" {
  description = "The main SpinApp's replicas (every route but the critical ones)."
  type        = number
  default     = 3
}

variable "critical_replicas" {
  description = "Pods of the critical routes' own SpinApp (<app_name>-critical: the same image; the payment provider's webhook, the job routes and operators' writes are routed there, and the ticker calls it). 2 by default, so one pod's loss or roll leaves the other."
  type        = number
  default     = 2
  validation {
    condition     = var.critical_replicas >= 1 && var.critical_replicas <= 20 && floor(var.critical_replicas) == var.critical_replicas
    error_message = "critical_replicas: a whole number from 1 to 20."
  }
}

variable "critical_resources" {
  description = "CPU and memory of each critical pod, requested and limited alike (Guaranteed QoS: reserved by the scheduler, evicted last). Size memory from the main app's pods (`kubectl top pods`): the shim runs the whole app in each."
  type = object({
    cpu    = string
    memory = string
  })
  default = { cpu = "1", memory = "512Mi" }
  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?m?$", var.critical_resources.cpu)) && can(regex("^[0-9]+(Ki|Mi|Gi|k|M|G)?$", var.critical_resources.memory))
    error_message = "critical_resources: cpu a Kubernetes quantity such as \"1\" or \"500m\", memory such as \"512Mi\"."
  }
}

variable "gateway" {
  description = "The Gateway API Gateway to attach the app to (gateway.networking.k8s.io/v1: name, namespace when not the app's, section_name for one listener, hostnames): two HTTPRoutes send every critical (route, method) pair of the manifest to the critical SpinApp and the rest to the main one. Null (default): no route; expose the two Services yourself, sending the critical pairs (output critical_routes) to <app_name>-critical."
  type = object({
    name         = string
    namespace    = optional(string)
    section_name = optional(string)
    hostnames    = optional(list(string), [])
  })
  default = null
}

variable "envoy_gateway" {
  description = "With gateway given and Envoy Gateway behind it: a BackendTrafficPolicy per HTTPRoute. max_parallel_requests / max_pending_requests: the main app's circuit breaker, per Envoy replica (Envoy answers 503 beyond them; the critical app keeps counters of its own); request_buffer: the size up to which Envoy receives a request's body whole before Spin gets the request (\"32Ki\": the app refuses bodies over 16 KiB), so a slow body never holds a Spin instance. Null (default): no policy (the kind needs Envoy Gateway's CRDs)."
  type = object({
    max_parallel_requests = optional(number)
    max_pending_requests  = optional(number)
    request_buffer        = optional(string, "32Ki")
  })
  default = null
  validation {
    condition     = var.envoy_gateway == null || (var.gateway != null && alltrue([for n in [try(var.envoy_gateway.max_parallel_requests, null), try(var.envoy_gateway.max_pending_requests, null)] : n == null || try(n >= 1 && floor(n) == n, false)]))
    error_message = "envoy_gateway: only with gateway given; its limits are whole numbers of at least 1."
  }
}

variable "settings" {
  description = "Optional settings of the app over their defaults, by name: drain_batch, drain_max_batches, drain_lease_ms, drain_reclaim_idle_ms, drain_max_deliveries, release_batch (whole numbers), demo_login (\"false\"; \"true\" only with demo_environment), payment_mode (\"test\" or \"live\": the provider's mode payments are taken in). Passed in the clear as the one Spin variable `settings` of the manifest, the pairs joined by commas in name order (\"drain_batch=1000,release_batch=500\"), with trusted_proxies (its own input); with neither, the manifest's default stays. The connection variables and the secrets are set by this configuration."
  type        = map(string)
  default     = {}
  validation {
    # The names and what each accepts: modules/app-variables (setting_patterns), the one list.
    condition     = alltrue([for k, v in var.settings : can(regex(module.app_variables.setting_patterns[k], v))])
    error_message = "settings: each name is one of ${join(", ", keys(module.app_variables.setting_patterns))}; demo_login is \"false\" (\"true\" only with demo_environment = true), payment_mode \"test\" or \"live\", admission_ipv6_prefix 1 to 128, the others whole numbers (0 to 999999999). Refused: ${join(", ", [for k, v in var.settings : "${k}=${v}" if !can(regex(module.app_variables.setting_patterns[k], v))])}."
  }
}

variable "trusted_proxies" {
  description = "CIDR ranges of the proxies that reach the app's pods: your Ingress or Gateway controller's pods, i.e. the cluster's pod CIDR (the default, 10.42.0.0/16, is k3s's and k3d's, as in SpinKube's quickstart; kubeadm with flannel uses 10.244.0.0/16, Calico 192.168.0.0/16: `kubectl get nodes -o jsonpath='{.items[*].spec.podCIDR}'`). From them X-Forwarded-For is believed (the client is its right-most entry outside these ranges); from anywhere else the peer is the client. The controller must append the client's address to X-Forwarded-For (ingress-nginx does). [] trusts no proxy."
  type        = list(string)
  default     = ["10.42.0.0/16"]
}

variable "network_policy" {
  description = "A NetworkPolicy on both SpinApps' pods. Ingress: only from ingress_namespaces (the namespaces of the pods that proxy to the app: Envoy Gateway's proxies run in its own namespace, envoy-gateway-system, by default; ingress-nginx in ingress-nginx; a Prometheus scraping the Service directly needs its namespace here too; default: the Gateway's namespace) and from the ticker. Egress: only DNS (port 53 to dns_namespace's pods), Redis (redis_endpoints' ports at redis_cidrs), Postgres (postgres' port at postgres_cidrs) and HTTPS (443, and payment_api_url's port) to any address but private (RFC 1918), loopback and link-local ones: the payment provider's API and shops' endpoints. Narrow redis_cidrs and postgres_cidrs to your services' ranges. Null: no policy (the cluster's CNI must enforce NetworkPolicies for it to matter)."
  type = object({
    ingress_namespaces = optional(list(string))
    dns_namespace      = optional(string, "kube-system")
    redis_cidrs        = optional(list(string), ["0.0.0.0/0"])
    postgres_cidrs     = optional(list(string), ["0.0.0.0/0"])
  })
  default = {}
  validation {
    condition = var.network_policy == null ? true : (
      alltrue([for c in concat(var.network_policy.redis_cidrs, var.network_policy.postgres_cidrs) : can(cidrhost(c, 0))]) &&
      length(var.network_policy.redis_cidrs) > 0 && length(var.network_policy.postgres_cidrs) > 0 &&
      length(var.network_policy.dns_namespace) > 0 &&
      (var.network_policy.ingress_namespaces == null ? true : length(var.network_policy.ingress_namespaces) > 0)
    )
    error_message = "network_policy: redis_cidrs and postgres_cidrs are non-empty lists of CIDR ranges; dns_namespace and ingress_namespaces (when given) are not empty."
  }
}

# --- Managed Redis and Postgres ---------------------------------------------------------------

variable "redis_endpoints" {
  description = "The managed Redis nodes (TLS), host and port each; every event's stock shards are dealt out over them."
  type = list(object({
    host = string
    port = number
  }))
}

variable "redis_host_pattern" {
  description = "With several nodes that do not share host:port, the host:port pattern that covers them all, no scheme (e.g. \"*.cache.example.com:6379\"; redis_origin is rediss:// and this)."
  type        = string
  default     = null
}

variable "redis_username" {
  description = "The Redis ACL user."
  type        = string
  default     = "default"
}

variable "redis_password" {
  description = "The Redis password (the same on every node; or give redis_passwords)."
  type        = string
  default     = null
  sensitive   = true
}

variable "redis_passwords" {
  description = "One password per node, in redis_endpoints order (e.g. several Upstash databases)."
  type        = list(string)
  default     = null
  sensitive   = true
}

variable "postgres" {
  description = "The managed Postgres: host, port, database, user. Its certificate must chain to a public CA (Spin verifies it against the shim's trust store)."
  type = object({
    host     = string
    port     = optional(number, 5432)
    database = string
    user     = string
  })
}

variable "postgres_password" {
  description = "The Postgres password."
  type        = string
  sensitive   = true
}

variable "migrate_image" {
  description = "Image of the migration Job (needs psql >= 10 and /bin/sh)."
  type        = string
  default     = "postgres:16-alpine"
}

# --- The ticker -------------------------------------------------------------------------------

variable "ticker_image" {
  description = "Image of the ticker (needs curl >= 7.76 and /bin/sh)."
  type        = string
  default     = "curlimages/curl:8.11.1"
}

variable "drain_for_ms" {
  description = "How long each drain call keeps draining (POST /admin/jobs/drain?for_ms=N, at most 60000). The ticker calls again right after, so orders wait for a drain at most about one drain pass."
  type        = number
  default     = 10000
  validation {
    condition     = var.drain_for_ms >= 1000 && var.drain_for_ms <= 60000
    error_message = "drain_for_ms: 1000 to 60000."
  }
}

variable "reconcile_every_s" {
  description = "How often the ticker calls POST /admin/jobs/reconcile (spin.toml's cron runs it every minute)."
  type        = number
  default     = 60
}

# --- Secrets ----------------------------------------------------------------------------------

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
  description = "The ticker's bearer token: added to operators as scheduler:scheduler:<token>, a role that runs the job routes (/admin/jobs/*) and nothing else, and sent by the ticker from a header file mounted from the Secret. Required: the ticker holds no person's secret."
  type        = string
  sensitive   = true
  validation {
    condition     = can(regex("^[A-Za-z0-9._~+/-]{32,}=*$", var.scheduler_token))
    error_message = "scheduler_token: at least 32 of A-Z a-z 0-9 . _ ~ + / - (then = padding), e.g. openssl rand -hex 32; the ticker sends it as `Authorization: Bearer <token>`."
  }
}

variable "demo_environment" {
  description = "Whether this deployment is a demo: only then may settings' demo_login be \"true\" (anyone may mint a buyer token and buy as anyone). False by default: the plan refuses demo_login = \"true\"."
  type        = bool
  default     = false
  nullable    = false
}

variable "payment_api_url" {
  description = "The payment provider's API origin (Stripe's by default), passed in the clear as the Spin variable payment_api_url: also the whole allowed_outbound_hosts entry \"{{ payment_api_url }}\" of the pay, jobs and timeout-release components."
  type        = string
  default     = "https://api.stripe.com"
  validation {
    condition     = can(regex("^https://[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$", var.payment_api_url))
    error_message = "payment_api_url: an https:// origin, scheme, host and an optional port, without a path or a trailing slash (https://api.stripe.com)."
  }
}

# --- Alerts -------------------------------------------------------------------------------------

variable "prometheus_rules" {
  description = "Load the alerts of infra/prometheus/seckill.rules.yml as a PrometheusRule (monitoring.coreos.com/v1) in the namespace. Needs the Prometheus operator's CRDs in the cluster (kube-prometheus-stack installs them), hence off by default."
  type        = bool
  default     = false
}

variable "prometheus_rule_labels" {
  description = "Labels of the PrometheusRule: what the Prometheus resource's ruleSelector matches (kube-prometheus-stack's default selects release = <its Helm release name>)."
  type        = map(string)
  default     = {}
}

variable "grafana_dashboard" {
  description = "Ship infra/grafana/seckill.dashboard.json as a ConfigMap that Grafana's dashboard sidecar loads (kube-prometheus-stack's Grafana runs it). A plain ConfigMap: nothing else is needed in the cluster."
  type        = bool
  default     = true
}

variable "grafana_dashboard_labels" {
  description = "Labels of the dashboard's ConfigMap: what Grafana's sidecar selects (kube-prometheus-stack's default label is grafana_dashboard = \"1\")."
  type        = map(string)
  default     = { grafana_dashboard = "1" }
}

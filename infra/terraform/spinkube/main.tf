module "app_variables" {
  source = "../modules/app-variables"

  redis_endpoints    = var.redis_endpoints
  redis_host_pattern = var.redis_host_pattern
  redis_username     = var.redis_username
  redis_password     = var.redis_password
  redis_passwords    = var.redis_passwords
  postgres           = var.postgres
  postgres_password  = var.postgres_password
  secrets            = var.secrets
  payment_api_url    = var.payment_api_url
  settings           = var.settings
  scheduler_token    = var.scheduler_token
  demo_environment   = var.demo_environment
  trusted_proxies    = var.trusted_proxies
}

locals {
  # The manifest's secret variables: into the Secret, referenced by the SpinApp.
  spin_secret_variables = {
    redis_url        = module.app_variables.spin_variables.redis_url
    pg_url           = module.app_variables.spin_variables.pg_url
    jwt_secret       = module.app_variables.spin_variables.jwt_secret
    admission_secret = module.app_variables.spin_variables.admission_secret
    operators        = module.app_variables.spin_variables.operators
    # Read by the payment webhook only.
    payment_webhook_secrets = module.app_variables.spin_variables.payment_webhook_secrets
    # The payment provider's API key (pay, jobs, timeout release); "" when not given.
    payment_api_key = module.app_variables.spin_variables.payment_api_key
  }
  # What allowed_outbound_hosts uses, from the same endpoints as the URLs, and the payment
  # provider's API origin: in the clear.
  spin_host_variables = {
    redis_origin    = module.app_variables.hosts.redis_origin
    pg_host         = module.app_variables.hosts.pg_host
    payment_api_url = module.app_variables.hosts.payment_api_url
  }
  # The non-secret variables: the hosts, and `settings` (var.settings and the trusted proxies,
  # rendered by the module) only when one is given (else the manifest's default, "", stays).
  spin_public_variables = merge(module.app_variables.settings_variable, local.spin_host_variables)

  # The manifest the image was pushed from (`spin registry push -f spin.http.toml`, this checkout).
  manifest_file = "${path.module}/../../../spin.http.toml"

  secret_name = "${var.app_name}-variables"
  # The Service the SpinKube operator creates for each SpinApp (port 80).
  app_service_url = "http://${var.app_name}.${var.namespace}.svc.cluster.local"
  # The critical routes' own SpinApp (and Service): the same image, reserved capacity.
  critical_app_name    = "${var.app_name}-critical"
  critical_service_url = "http://${local.critical_app_name}.${var.namespace}.svc.cluster.local"

  migrations_dir  = "${path.module}/../../../migrations"
  migration_files = fileset(local.migrations_dir, "*.sql")
  migrations_hash = substr(sha256(join("", concat(
    [for f in local.migration_files : filesha256("${local.migrations_dir}/${f}")],
    [filesha256("${path.module}/../files/migrate-locked.sh")],
  ))), 0, 10)
}

# --- Spin's settings: a runtime config, no backtraces, logs to stdout ---------------------------
# The SpinApp gets every variable through runtimeConfig.loadFromSecret: the operator mounts the
# Secret's `runtime-config.toml` at /runtime-config.toml (spin-operator
# internal/controller/deployment.go), which containerd-shim-spin loads when it exists
# (containerd-shim-spin src/constants.rs RUNTIME_CONFIG_PATH, src/trigger.rs). It holds one static
# variables provider with a value for every variable of the manifest, so Spin never asks its
# environment provider (a blocking call per lookup, and Spin resolves every app-level variable on
# an instance's first outbound connection; ../files/spin-runtime-config.sh cites Spin's source).
# SPIN_VARIABLE_* env (SpinApp `variables`) would be that slower path, so the SpinApp sets none.
# The cost: the secrets are in a Secret key the pods mount as a file (read-only, inside the pod);
# they were already in this Secret, and the Terraform state, which already held them there,
# holds them once more in that key.
#
# Logs: the shim never writes component logs to files (src/trigger.rs: log_dir Unset, "force logs
# to be displayed to stdout"). Backtraces: the shim runs Spin in the container process, whose
# environment runwasi's libcontainer resets to the OCI spec's (youki container_init_process.rs),
# i.e. the image's (a `spin registry push` image sets none) and the pod's, and a SpinApp puts
# nothing there but SPIN_VARIABLE_* (spin-operator ConstructEnvForApp): no RUST_BACKTRACE can be
# set, nor RUST_LIB_BACKTRACE=0, and this root sets none.

module "runtime_config" {
  source = "../modules/spin-runtime-config"

  manifest = file(local.manifest_file)
  values   = merge(local.spin_public_variables, local.spin_secret_variables)
}

resource "kubernetes_namespace_v1" "app" {
  metadata {
    name = var.namespace
  }
}

resource "kubernetes_secret_v1" "spin" {
  metadata {
    name      = local.secret_name
    namespace = kubernetes_namespace_v1.app.metadata[0].name
  }
  type = "Opaque"
  data = merge(local.spin_secret_variables, {
    # The ticker's header file (curl -H @file): the scheduler's own token (its operators entry
    # scheduler:scheduler:<token> runs the job routes and nothing else), never a person's secret,
    # and never on a command line.
    authorization = "Authorization: Bearer ${module.app_variables.scheduler_token}"
    # Spin's runtime config (runtimeConfig.loadFromSecret reads this key).
    "runtime-config.toml" = module.runtime_config.toml
  })
}

# --- Schema: a Job per set of migrations, applied under a Postgres advisory lock ----------------

resource "kubernetes_config_map_v1" "migrations" {
  metadata {
    name      = "${var.app_name}-migrations-${local.migrations_hash}"
    namespace = kubernetes_namespace_v1.app.metadata[0].name
  }
  data = merge(
    { for f in local.migration_files : f => file("${local.migrations_dir}/${f}") },
    { "migrate-locked.sh" = file("${path.module}/../files/migrate-locked.sh") },
  )
}

resource "kubernetes_job_v1" "migrate" {
  metadata {
    name      = "${var.app_name}-migrate-${local.migrations_hash}"
    namespace = kubernetes_namespace_v1.app.metadata[0].name
  }
  spec {
    backoff_limit = 6
    template {
      metadata {
        labels = { app = "${var.app_name}-migrate" }
      }
      spec {
        restart_policy = "Never"
        container {
          name    = "migrate"
          image   = var.migrate_image
          command = ["sh", "/seckill/migrate-locked.sh", "/seckill"]
          env {
            name = "PG_URL"
            value_from {
              secret_key_ref {
                name = kubernetes_secret_v1.spin.metadata[0].name
                key  = "pg_url"
              }
            }
          }
          volume_mount {
            name       = "migrations"
            mount_path = "/seckill"
            read_only  = true
          }
          security_context {
            run_as_non_root            = true
            run_as_user                = 70
            allow_privilege_escalation = false
            read_only_root_filesystem  = false # mktemp in /tmp
          }
        }
        volume {
          name = "migrations"
          config_map {
            name = kubernetes_config_map_v1.migrations.metadata[0].name
          }
        }
      }
    }
  }
  wait_for_completion = true
  timeouts {
    create = "10m"
  }
}

# --- The app: a SpinApp of the cron-free manifest -----------------------------------------------

resource "kubernetes_manifest" "spinapp" {
  manifest = {
    apiVersion = "core.spinkube.dev/v1alpha1"
    kind       = "SpinApp"
    metadata = {
      name      = var.app_name
      namespace = kubernetes_namespace_v1.app.metadata[0].name
    }
    spec = {
      image    = var.image
      executor = var.executor
      replicas = var.replicas
      # Every variable, from the Secret's runtime-config.toml (a static provider; see above).
      runtimeConfig = { loadFromSecret = kubernetes_secret_v1.spin.metadata[0].name }
      # Spin reads the runtime config once, at start: a new one rolls the pods.
      podAnnotations = { "seckill/runtime-config-sha256" = module.runtime_config.sha256 }
    }
  }

  depends_on = [kubernetes_job_v1.migrate]

  lifecycle {
    precondition {
      condition     = length(module.runtime_config.missing) == 0
      error_message = "Some variables of spin.http.toml have neither a value nor a default: ${join(", ", module.runtime_config.missing)}."
    }
  }
}

# --- The critical routes: a SpinApp of their own, routed by the manifest's request classes ------
# Real Spin (which the shim runs) sheds nothing: a pod whose instance pool is full answers an
# empty 500, and a slow request body holds an instance while Spin waits for it. So the critical
# routes (the payment provider's webhook, the job routes, operators' writes: the manifest's
# request classes, read by modules/request-classes; a route without a class fails the plan) get a
# SpinApp of their own: the same image, runtime config and executor, `critical_replicas` pods
# whose requests equal their limits (Guaranteed QoS: the scheduler reserves the capacity and the
# kubelet evicts them last; the main SpinApp sets none, so it goes first). A SpinApp has no
# priorityClassName (spin-operator api/v1alpha1/spinapp_types.go), so no PriorityClass is set.
# The ticker calls the job routes on this app's Service; the Gateway API routes below send the
# public critical pairs here.

module "request_classes" {
  source = "../modules/request-classes"

  manifest = file(local.manifest_file)
}

resource "kubernetes_manifest" "spinapp_critical" {
  manifest = {
    apiVersion = "core.spinkube.dev/v1alpha1"
    kind       = "SpinApp"
    metadata = {
      name      = local.critical_app_name
      namespace = kubernetes_namespace_v1.app.metadata[0].name
    }
    spec = {
      image          = var.image
      executor       = var.executor
      replicas       = var.critical_replicas
      runtimeConfig  = { loadFromSecret = kubernetes_secret_v1.spin.metadata[0].name }
      podAnnotations = { "seckill/runtime-config-sha256" = module.runtime_config.sha256 }
      resources = {
        limits   = var.critical_resources
        requests = var.critical_resources
      }
    }
  }

  depends_on = [kubernetes_job_v1.migrate]

  lifecycle {
    precondition {
      condition     = length(module.runtime_config.missing) == 0
      error_message = "Some variables of spin.http.toml have neither a value nor a default: ${join(", ", module.runtime_config.missing)}."
    }
  }
}

# --- Routing: Gateway API HTTPRoutes on your Gateway (var.gateway) -------------------------------
# An HTTPRoute can match a method, an Ingress cannot, so the operators' reads of a route whose
# writes are critical stay with the main app. Two routes on the same parent and hostnames (the
# gateway merges their rules and ranks them as Gateway API says: Exact before the longest
# PathPrefix, then a match with a method before one without):
#   <app>: PathPrefix "/" to the main app, and the lower-class methods of the critical routes
#     (module.request_classes.gateway_main_matches: GET and HEAD of /admin/events...);
#   <app>-critical: every critical pair (module.request_classes.gateway_critical_matches).
# A route with a `:param` segment is a RegularExpression match, whose rank Gateway API leaves to
# the implementation: Envoy Gateway ranks Exact, then RegularExpression, then PathPrefix, each by
# length, then by header matches, a method counting as one (envoyproxy/gateway
# internal/gatewayapi/sort.go and route.go), which is what these rules need; check another
# implementation's order before relying on it. tests/terraform/check_roots.py sends every route of
# spin.http.toml through these rules with that order.

locals {
  gateway_parent_refs = var.gateway == null ? [] : [merge(
    { name = var.gateway.name },
    var.gateway.namespace == null ? {} : { namespace = var.gateway.namespace },
    var.gateway.section_name == null ? {} : { sectionName = var.gateway.section_name },
  )]
  gateway_hostnames = var.gateway == null ? [] : var.gateway.hostnames
}

resource "kubernetes_manifest" "route_main" {
  count = var.gateway == null ? 0 : 1
  manifest = {
    apiVersion = "gateway.networking.k8s.io/v1"
    kind       = "HTTPRoute"
    metadata = {
      name      = var.app_name
      namespace = kubernetes_namespace_v1.app.metadata[0].name
    }
    spec = {
      parentRefs = local.gateway_parent_refs
      hostnames  = local.gateway_hostnames
      rules = [
        {
          matches     = [{ path = { type = "PathPrefix", value = "/" } }]
          backendRefs = [{ name = var.app_name, port = 80 }]
        },
        {
          matches     = module.request_classes.gateway_main_matches
          backendRefs = [{ name = var.app_name, port = 80 }]
        },
      ]
    }
  }

  depends_on = [kubernetes_manifest.spinapp]
}

resource "kubernetes_manifest" "route_critical" {
  count = var.gateway == null ? 0 : 1
  manifest = {
    apiVersion = "gateway.networking.k8s.io/v1"
    kind       = "HTTPRoute"
    metadata = {
      name      = local.critical_app_name
      namespace = kubernetes_namespace_v1.app.metadata[0].name
    }
    spec = {
      parentRefs = local.gateway_parent_refs
      hostnames  = local.gateway_hostnames
      rules = [
        {
          matches     = module.request_classes.gateway_critical_matches
          backendRefs = [{ name = local.critical_app_name, port = 80 }]
        },
      ]
    }
  }

  depends_on = [kubernetes_manifest.spinapp_critical]

  lifecycle {
    precondition {
      # A rule without matches matches every path; Gateway API takes at most 64 per rule.
      condition     = length(module.request_classes.gateway_critical_matches) > 0 && length(module.request_classes.gateway_critical_matches) <= 64 && length(module.request_classes.gateway_main_matches) <= 64
      error_message = "The critical routes make ${length(module.request_classes.gateway_critical_matches)} matches (and ${length(module.request_classes.gateway_main_matches)} for the main app): from 1 to 64 per HTTPRoute rule."
    }
  }
}

# Envoy Gateway's BackendTrafficPolicy on each route (var.envoy_gateway; off by default: the kind
# needs Envoy Gateway's CRDs). Envoy keeps circuit-breaker counters per backend reference, so the
# critical app's are its own however full the main app's are; max_parallel_requests and
# max_pending_requests bound the main app's (per Envoy replica; beyond them Envoy answers 503 at
# once, before Spin's pool fills and answers an empty 500). request_buffer makes Envoy receive a
# body whole (up to that size, 413 beyond) before the request reaches Spin, so a slow body holds
# Envoy's memory, not a Spin instance.

resource "kubernetes_manifest" "backend_traffic_policy" {
  for_each = var.gateway != null && var.envoy_gateway != null ? { main = var.app_name, critical = local.critical_app_name } : {}
  manifest = {
    apiVersion = "gateway.envoyproxy.io/v1alpha1"
    kind       = "BackendTrafficPolicy"
    metadata = {
      name      = each.value
      namespace = kubernetes_namespace_v1.app.metadata[0].name
    }
    spec = merge(
      { targetRefs = [{ group = "gateway.networking.k8s.io", kind = "HTTPRoute", name = each.value }] },
      each.key == "main" && (var.envoy_gateway.max_parallel_requests != null || var.envoy_gateway.max_pending_requests != null) ? {
        circuitBreaker = merge(
          var.envoy_gateway.max_parallel_requests == null ? {} : { maxParallelRequests = var.envoy_gateway.max_parallel_requests },
          var.envoy_gateway.max_pending_requests == null ? {} : { maxPendingRequests = var.envoy_gateway.max_pending_requests },
        )
      } : {},
      var.envoy_gateway.request_buffer == null ? {} : { requestBuffer = { limit = var.envoy_gateway.request_buffer } },
    )
  }

  depends_on = [kubernetes_manifest.route_main, kubernetes_manifest.route_critical]
}

# --- The scheduler: a ticker that keeps the drain and the timeout release running -----------------
# A CronJob fires once a minute at best; the drain runs every second under spin.toml's cron. The
# ticker calls POST /admin/jobs/drain?for_ms=N (the app drains for N ms), then one timeout-release
# pass, then again at once; reconcile every reconcile_every_s. Beside that loop, a second one keeps
# the order events flowing to the shop (POST /admin/jobs/deliver-events?for_ms=N), so a slow
# endpoint never holds the drain back. The drain's lease in Redis makes a
# second ticker (or a rollout overlap) harmless. It calls the critical SpinApp's Service: the
# jobs are critical, so a buyers' flood on the main app never starves the drain. It sends the
# scheduler token (role scheduler: the job routes and nothing else) from the Secret's header file.

locals {
  ticker_script = <<-EOT
    set -u
    last_reconcile=0
    call() { # call <path> <max seconds>
      if ! curl -sS --fail-with-body -m "$2" -X POST -H @/run/seckill/authorization "$APP_URL$1"; then
        echo "ticker: POST $1 failed" >&2
        sleep 1
      fi
      echo
    }
    while :; do
      call "/admin/jobs/deliver-events?for_ms=$DRAIN_FOR_MS" $((DRAIN_FOR_MS / 1000 + 60))
    done &
    while :; do
      call "/admin/jobs/drain?for_ms=$DRAIN_FOR_MS" $((DRAIN_FOR_MS / 1000 + 30))
      call "/admin/jobs/timeout-release" 60
      now=$(date +%s)
      if [ $((now - last_reconcile)) -ge "$RECONCILE_EVERY_S" ]; then
        call "/admin/jobs/reconcile" 120
        last_reconcile=$now
      fi
    done
  EOT
}

resource "kubernetes_deployment_v1" "ticker" {
  metadata {
    name      = "${var.app_name}-ticker"
    namespace = kubernetes_namespace_v1.app.metadata[0].name
    labels    = { app = "${var.app_name}-ticker" }
  }
  spec {
    replicas = 1
    selector {
      match_labels = { app = "${var.app_name}-ticker" }
    }
    template {
      metadata {
        labels = { app = "${var.app_name}-ticker" }
      }
      spec {
        container {
          name    = "ticker"
          image   = var.ticker_image
          command = ["/bin/sh", "-c", local.ticker_script]
          env {
            name  = "APP_URL"
            value = local.critical_service_url
          }
          env {
            name  = "DRAIN_FOR_MS"
            value = tostring(var.drain_for_ms)
          }
          env {
            name  = "RECONCILE_EVERY_S"
            value = tostring(var.reconcile_every_s)
          }
          volume_mount {
            name       = "authorization"
            mount_path = "/run/seckill"
            read_only  = true
          }
          resources {
            requests = { cpu = "10m", memory = "16Mi" }
            limits   = { memory = "64Mi" }
          }
          security_context {
            run_as_non_root            = true
            run_as_user                = 100
            allow_privilege_escalation = false
            read_only_root_filesystem  = true
            capabilities {
              drop = ["ALL"]
            }
          }
        }
        volume {
          name = "authorization"
          secret {
            secret_name = kubernetes_secret_v1.spin.metadata[0].name
            items {
              key  = "authorization"
              path = "authorization"
            }
          }
        }
      }
    }
  }

  depends_on = [kubernetes_manifest.spinapp_critical]
}

# --- The app's pods on the network: a NetworkPolicy (var.network_policy) -------------------------
# Both SpinApps' pods (the operator labels them core.spinkube.dev/app-name = <SpinApp>) take
# requests only from the namespaces of the proxies in front (the Gateway's, or
# network_policy.ingress_namespaces) and from the ticker, and open connections only to DNS, to
# Redis and Postgres on their ports (at network_policy.redis_cidrs / postgres_cidrs), and over
# HTTPS to public addresses: the payment provider's API (payment_api_url, and its port when not
# 443) and the shops' order events endpoints (on 443: one on another port is not reached, and
# its deliveries fail until it moves). Private (RFC 1918), loopback and link-local ranges are
# excepted from that HTTPS rule, so a component cannot reach the cluster's services, the nodes or
# a cloud's metadata endpoint by it; the ticker and the migration Job are not selected.

locals {
  network_policy_ingress_namespaces = var.network_policy == null ? [] : (
    var.network_policy.ingress_namespaces != null ? var.network_policy.ingress_namespaces : (
      var.gateway == null ? [] : [coalesce(var.gateway.namespace, var.namespace)]
    )
  )
  # HTTPS to the internet, not to private, loopback or link-local addresses.
  network_policy_public = {
    "0.0.0.0/0" = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8", "169.254.0.0/16"]
    "::/0"      = ["fc00::/7", "::1/128", "fe80::/10"]
  }
  network_policy_https_ports = distinct([443, tonumber(try(regex(":([0-9]+)$", var.payment_api_url)[0], "443"))])
  network_policy_redis_ports = distinct([for e in var.redis_endpoints : e.port])
}

resource "kubernetes_network_policy_v1" "app" {
  count = var.network_policy == null ? 0 : 1

  metadata {
    name      = var.app_name
    namespace = kubernetes_namespace_v1.app.metadata[0].name
  }

  spec {
    pod_selector {
      match_expressions {
        key      = "core.spinkube.dev/app-name"
        operator = "In"
        values   = [var.app_name, local.critical_app_name]
      }
    }
    policy_types = ["Ingress", "Egress"]

    # The proxies in front (the Gateway's or the ingress controller's pods), and the ticker.
    ingress {
      from {
        namespace_selector {
          match_expressions {
            key      = "kubernetes.io/metadata.name"
            operator = "In"
            values   = local.network_policy_ingress_namespaces
          }
        }
      }
      from {
        pod_selector {
          match_labels = { app = "${var.app_name}-ticker" }
        }
      }
    }

    # DNS: the cluster's resolver.
    egress {
      to {
        namespace_selector {
          match_labels = { "kubernetes.io/metadata.name" = var.network_policy.dns_namespace }
        }
      }
      ports {
        port     = "53"
        protocol = "UDP"
      }
      ports {
        port     = "53"
        protocol = "TCP"
      }
    }

    # Redis: its nodes' ports.
    egress {
      dynamic "to" {
        for_each = var.network_policy.redis_cidrs
        content {
          ip_block {
            cidr = to.value
          }
        }
      }
      dynamic "ports" {
        for_each = local.network_policy_redis_ports
        content {
          port     = tostring(ports.value)
          protocol = "TCP"
        }
      }
    }

    # Postgres: its port.
    egress {
      dynamic "to" {
        for_each = var.network_policy.postgres_cidrs
        content {
          ip_block {
            cidr = to.value
          }
        }
      }
      ports {
        port     = tostring(var.postgres.port)
        protocol = "TCP"
      }
    }

    # HTTPS to public addresses: the payment provider's API, shops' endpoints.
    egress {
      dynamic "to" {
        for_each = local.network_policy_public
        content {
          ip_block {
            cidr   = to.key
            except = to.value
          }
        }
      }
      dynamic "ports" {
        for_each = local.network_policy_https_ports
        content {
          port     = tostring(ports.value)
          protocol = "TCP"
        }
      }
    }
  }

  lifecycle {
    precondition {
      condition     = length(local.network_policy_ingress_namespaces) > 0
      error_message = "network_policy: no namespace may reach the app. Without gateway, give network_policy.ingress_namespaces (the namespaces of the pods that proxy to the app: your ingress controller's), or set network_policy = null."
    }
  }
}

# --- Alerts: the rules file as a PrometheusRule --------------------------------------------------
# ../../prometheus/seckill.rules.yml is the alerts' one home: its groups go into the spec as they
# are. The Prometheus that selects the rule (prometheus_rule_labels) evaluates them over what it
# scrapes: the app's GET /admin/metrics and redis_exporter (DEPLOY.md, "Alerts"). The shim runs
# Spin, not seckill-host, so the host's seckill_http_* series (SeckillShedding) do not exist here.

resource "kubernetes_manifest" "alert_rules" {
  count = var.prometheus_rules ? 1 : 0
  manifest = {
    apiVersion = "monitoring.coreos.com/v1"
    kind       = "PrometheusRule"
    metadata = {
      name      = "${var.app_name}-alerts"
      namespace = kubernetes_namespace_v1.app.metadata[0].name
      labels    = var.prometheus_rule_labels
    }
    spec = { groups = yamldecode(file("${path.module}/../../prometheus/seckill.rules.yml")).groups }
  }
}

# --- Dashboard: the Grafana dashboard as a ConfigMap for Grafana's sidecar -----------------------
# ../../grafana/seckill.dashboard.json is the dashboard's one home (the alerts' thresholds drawn on
# their panels; scripts/check-dashboard.py holds it to the rules and to what the app exports).
# Grafana's dashboard sidecar (kube-prometheus-stack's default) loads every ConfigMap that carries
# its label (grafana_dashboard_labels) from the namespaces it watches.

resource "kubernetes_config_map_v1" "dashboard" {
  count = var.grafana_dashboard ? 1 : 0
  metadata {
    name      = "${var.app_name}-dashboard"
    namespace = kubernetes_namespace_v1.app.metadata[0].name
    labels    = var.grafana_dashboard_labels
  }
  data = {
    "seckill.dashboard.json" = file("${path.module}/../../grafana/seckill.dashboard.json")
  }
}

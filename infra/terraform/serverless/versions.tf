# seckill without servers: Upstash Redis (TLS, writes persisted before the reply) and Neon
# Postgres (public TLS endpoint, publicly trusted certificate), with the app on Akamai Functions
# or Fermyon Cloud, deployed by the spin CLI from spin.http.toml (HTTP triggers only: neither
# platform runs [[trigger.cron]]). DEPLOY.md (beside this directory) walks through it.
#
# Capacity is the platform's: it runs the instances and routes the requests, so the critical
# routes (the manifest's request classes) get no capacity of their own here, and nothing is
# routed by class; DEPLOY.md, "At overload", says what each platform documents of overload.
#
# The upstash and neon providers cannot be installed on the CI machines (their registry is
# unreachable there): this root is checked by `terraform fmt` and tests/terraform/check_roots.py,
# not by init/plan.

terraform {
  required_version = ">= 1.9"

  required_providers {
    upstash = {
      source  = "upstash/upstash"
      version = "~> 1.5"
    }
    neon = {
      source  = "kislerdm/neon"
      version = "~> 0.6"
    }
  }
}

provider "upstash" {
  email   = var.upstash_email
  api_key = var.upstash_api_key
}

provider "neon" {
  api_key = var.neon_api_key
}

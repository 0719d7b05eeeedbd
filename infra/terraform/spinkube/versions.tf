# seckill on Kubernetes with SpinKube: a SpinApp (core.spinkube.dev/v1alpha1) running the
# cron-free manifest's OCI image (SpinKube's containerd shim takes no cron trigger), its secret
# variables in a Secret, a Job that applies the migrations, and a small "ticker" Deployment that
# calls the job routes without pause (the scheduler a CronJob cannot be: it fires once a minute
# at best); a second SpinApp of the same image reserved for the critical routes (the manifest's
# request classes), which the ticker calls, and with a Gateway given, HTTPRoutes sending the
# critical (route, method) pairs there and the rest to the app; a NetworkPolicy on the app's pods;
# optionally Envoy Gateway policies and the alerts as a PrometheusRule. Redis and Postgres are managed services given as variables. DEPLOY.md walks
# through it.
#
# The kubernetes provider cannot be installed on the CI machines: this root is checked by
# `terraform fmt` and tests/terraform/check_roots.py, not by init/plan.

terraform {
  required_version = ">= 1.9"

  required_providers {
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = "~> 2.35"
    }
  }
}

provider "kubernetes" {
  config_path    = var.kubeconfig_path
  config_context = var.kube_context
}

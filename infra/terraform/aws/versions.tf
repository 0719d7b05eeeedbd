# The whole AWS footprint of seckill: network, Redis (MemoryDB by default), RDS PostgreSQL, the
# secrets, and the Spin app on EC2 instances behind an ALB. Only the aws provider and built-ins:
# no data sources, so `plan` runs offline (zones, ranges, the AMI are variables).
# DEPLOY.md (beside this directory) walks through it.

terraform {
  required_version = ">= 1.9" # variable validations that refer to other variables

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.100"
    }
  }
}

provider "aws" {
  region = var.region

  # Only for checks without an AWS account (scripts/terraform-checks.sh, tests/plan.tfvars):
  # with fake credentials nothing is called until apply.
  skip_credentials_validation = var.offline_checks
  skip_requesting_account_id  = var.offline_checks
  skip_metadata_api_check     = var.offline_checks
  skip_region_validation      = var.offline_checks

  default_tags {
    tags = merge({ Application = var.name }, var.tags)
  }
}

# Example inputs for the offline checks (scripts/terraform-checks.sh: `terraform plan` with fake
# credentials). Every value here is made up: never deploy with these secrets.
offline_checks = true
region         = "us-east-1"

ami_id           = "ami-0123456789abcdef0"
app_artifact_url = "https://artifacts.example.com/seckill/seckill-0.1.0.tar.gz"

redis_password    = "example-redis-password-0123456789"
postgres_password = "example-postgres-password-0123"
secrets = {
  jwt_secret       = "example-jwt-secret-example-jwt-secret-00"
  admission_secret = "example-admission-secret-example-admission"
  operators        = "ops:operator:example-operator-secret-example-operator"
  # The payment provider's webhook signing secret(s), comma-separated (Stripe's whsec_…).
  payment_webhook_secrets = "whsec_example-webhook-secret-example-0"
}

# HTTPS on 443, HTTP redirected (an example ARN: plan does not look it up).
certificate_arn = "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"

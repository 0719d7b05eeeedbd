# Example inputs for the offline checks (scripts/terraform-checks.sh: `terraform plan` with fake
# credentials). Every value here is made up: never deploy with these secrets.
offline_checks = true
region         = "us-east-1"

ami_id              = "ami-0123456789abcdef0"
app_artifact_url    = "https://artifacts.example.com/seckill/seckill-0.1.0.tar.gz"
app_artifact_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
spin_sha256         = "1111111111111111111111111111111111111111111111111111111111111111"

redis_password        = "example-redis-password-0123456789"
postgres_password     = "example-postgres-password-0123"
postgres_app_password = "example-app-password-0123456"
secrets = {
  jwt_secret       = "example-jwt-secret-example-jwt-secret-00"
  admission_secret = "example-admission-secret-example-admission"
  operators        = "ops:operator:example-operator-secret-example-operator"
  # The payment provider's webhook signing secret(s), comma-separated (Stripe's whsec_…).
  payment_webhook_secrets = "whsec_example-webhook-secret-example-0"
  # Its restricted API key (Stripe's rk_test_… / rk_live_…, of payment_mode's mode).
  payment_api_key = "rk_test_example0000000000000000000000000"
}

# HTTPS on 443, HTTP redirected (an example ARN: plan does not look it up).
certificate_arn = "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"

# CloudFront in front (cdn = true by default): the origin's name in that certificate, the secret
# header, and the prefix list's id given (its lookup would call the API).
cdn_origin_domain_name    = "origin.shop.example.com"
cdn_origin_secret         = "example-origin-secret-example-origin-00"
cloudfront_prefix_list_id = "pl-3b927c52"

# The alerts' workspace, to plan it too.
prometheus_workspace = true

#!/bin/bash
# Run at every start of the app's service, by either runtime (Spin's start script and
# host-prestart.sh), as the service user with /etc/seckill/boot.env in its environment: applies
# the pending migrations as the master user under the advisory lock and keeps the app's own role
# (../../files/migrate-locked.sh), verifying the RDS certificate. The master's URL and the app
# role's password come from Secrets Manager here and go nowhere else: the app itself connects
# with pg_url, the app role's.
set -euo pipefail
secret() { aws secretsmanager get-secret-value --region "$SECKILL_REGION" --secret-id "$1" --query SecretString --output text; }
url=$(secret "$SECKILL_MIGRATION_PG_URL_ARN")
APP_ROLE_PASSWORD=$(secret "$SECKILL_PG_APP_PASSWORD_ARN")
export APP_ROLE=$SECKILL_PG_APP_ROLE APP_ROLE_PASSWORD
PG_URL="${url/sslmode=require/sslmode=verify-full}&sslrootcert=/etc/seckill/rds-ca.pem" \
  exec /opt/seckill/bin/migrate-locked /opt/seckill/app/migrations

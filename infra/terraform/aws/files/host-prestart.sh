#!/bin/bash
# ExecStartPre= of seckill-host.service on the AWS instances (runtime = "seckill-host"; the
# drop-in boot.sh.tftpl writes), run at every start as the service user, inside the unit's
# sandbox, with /etc/seckill/boot.env in its environment:
#   1. the secret Spin variables (SECKILL_SECRET_ARNS: name=arn pairs) from Secrets Manager into
#      $RUNTIME_DIRECTORY/secrets.env, i.e. /run/seckill/secrets.env: a systemd environment file
#      on a tmpfs, mode 0600, removed when the service stops, that the drop-in's EnvironmentFile=
#      hands to seckill-host as SPIN_VARIABLE_<NAME> (the same place Spin's start script puts
#      them, its environment, just through a file systemd reads);
#   2. the pending migrations and the app's Postgres role (migrate.sh, as Spin's start script
#      does before `spin up`).
set -euo pipefail
umask 077
out=${RUNTIME_DIRECTORY:?RuntimeDirectory= is not set}/secrets.env
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
for pair in $SECKILL_SECRET_ARNS; do
  name=${pair%%=*}
  value=$(aws secretsmanager get-secret-value --region "$SECKILL_REGION" --secret-id "${pair#*=}" \
    --query SecretString --output text)
  if [[ $value == *[[:cntrl:]]* ]]; then
    echo "host-prestart: the secret $name holds a control character" >&2; exit 1
  fi
  # Double-quoted as systemd reads environment files: \ " ` and $ each behind a backslash.
  value=${value//\\/\\\\}; value=${value//\"/\\\"}; value=${value//\`/\\\`}; value=${value//\$/\\\$}
  printf 'SPIN_VARIABLE_%s="%s"\n' "${name^^}" "$value" >>"$tmp"
done
mv -f "$tmp" "$out"
trap - EXIT
/opt/seckill/bin/migrate

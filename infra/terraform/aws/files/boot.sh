# seckill instance boot (appended to the user_data that app.tf writes, which first puts the
# non-secret settings in /etc/seckill/boot.env, ../../files/migrate-locked.sh in
# /etc/seckill/migrate-locked and ../../files/spin-runtime-config.sh in
# /etc/seckill/spin-runtime-config). Runs once, as root, under cloud-init:
#   1. packages: psql (migrations), curl, tar, the AWS CLI (secrets at start);
#   2. the RDS CA bundle into the system trust store (Spin verifies Postgres certificates
#      against it, for sslmode=require too);
#   3. Spin and the spin-trigger-cron plugin, for a `seckill` system user;
#   4. the app artifact (spin.toml, the .wasm files, migrations/);
#   5. a systemd service whose start reads the secrets from Secrets Manager, applies the
#      migrations under a Postgres advisory lock, writes Spin's runtime config and execs
#      `spin up -f spin.toml` with the settings that keep Spin's per-request CPU down:
#        --runtime-config-file: a static variables provider holding every variable, so no lookup
#          goes through the environment provider's `block_in_place` (files/spin-runtime-config.sh
#          says why and cites Spin's source);
#        --log-dir "": components' stdout/stderr go to Spin's stderr, i.e. the journal, instead of
#          two log files opened for every instance (Spin crates/trigger/src/cli.rs: an empty
#          --log-dir unsets the log directory; crates/trigger/src/cli/stdio.rs opens
#          <component>_stdout.txt and _stderr.txt per instance when one is set);
#        no RUST_BACKTRACE (UnsetEnvironment= and unset) and RUST_LIB_BACKTRACE=0: with a backtrace
#          variable set, every error Spin/wasmtime builds as a store is dropped captures a
#          backtrace (2-6 % of Spin's CPU per request, measured).
set -euo pipefail
exec > >(tee -a /var/log/seckill-boot.log) 2>&1
set -a
. /etc/seckill/boot.env
set +a
echo "seckill boot: $(date -u +%FT%TZ)"

retry() { local n=0; until "$@"; do n=$((n + 1)); [ "$n" -ge 5 ] && return 1; sleep $((n * 3)); done; }
fetch() { # fetch <url> <file> [sha256]
  case $1 in
    s3://*) retry aws s3 cp --only-show-errors --region "$SECKILL_REGION" "$1" "$2" ;;
    *) retry curl -fsSL --proto '=https' -o "$2" "$1" ;;
  esac
  if [ -n "${3:-}" ]; then echo "$3  $2" | sha256sum -c -; fi
}

# 1. Packages.
if command -v dnf >/dev/null 2>&1; then
  dnf install -y -q postgresql16 tar gzip ca-certificates awscli-2 || dnf install -y -q postgresql15 tar gzip ca-certificates awscli-2
  CA_BUNDLE=/etc/pki/tls/certs/ca-bundle.crt
elif command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  retry apt-get update -qq
  apt-get install -y -qq --no-install-recommends postgresql-client curl tar ca-certificates awscli
  CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
else
  echo "unsupported image: neither dnf nor apt-get" >&2; exit 1
fi

# 2. The RDS CA into the system trust store.
fetch "$SECKILL_RDS_CA_URL" /etc/seckill/rds-ca.pem
if [ -d /etc/pki/ca-trust/source/anchors ]; then
  cp /etc/seckill/rds-ca.pem /etc/pki/ca-trust/source/anchors/seckill-rds-ca.pem
  update-ca-trust extract
else
  cp /etc/seckill/rds-ca.pem /usr/local/share/ca-certificates/seckill-rds-ca.crt
  update-ca-certificates
fi

# 3. Spin and the cron plugin.
id seckill >/dev/null 2>&1 || useradd --system --home-dir /opt/seckill --create-home --shell /usr/sbin/nologin seckill
fetch "$SECKILL_SPIN_URL" /tmp/spin.tar.gz "$SECKILL_SPIN_SHA256"
tar -xzf /tmp/spin.tar.gz -C /usr/local/bin --no-anchored spin
chmod 0755 /usr/local/bin/spin
as_seckill() { runuser -u seckill -- env HOME=/opt/seckill "$@"; }
retry as_seckill spin plugins install --yes --url "$SECKILL_CRON_PLUGIN_URL"

# 4. The app.
fetch "$SECKILL_APP_ARTIFACT_URL" /tmp/app.tar.gz "$SECKILL_APP_ARTIFACT_SHA256"
rm -rf /opt/seckill/app && install -d -o seckill -g seckill /opt/seckill/app
tar -xzf /tmp/app.tar.gz -C /opt/seckill/app
chown -R seckill:seckill /opt/seckill/app
test -f /opt/seckill/app/spin.toml || { echo "the artifact has no spin.toml" >&2; exit 1; }
test -d /opt/seckill/app/migrations || { echo "the artifact has no migrations/" >&2; exit 1; }

# 5. The service. What it costs: Spin's static variables provider reads its values from a file,
#    so the secrets are in one, /run/seckill/runtime-config.toml: on a tmpfs (never on the
#    volume), mode 0600 in a 0700 directory, owned by the seckill user, rewritten from Secrets
#    Manager at every start and removed when the service stops (RuntimeDirectory=). They are not
#    in user_data, nor in Spin's environment (unset before exec), and Terraform's state holds no
#    more than before (the Secrets Manager versions). Root, and anything running as seckill, can
#    read them: the same reach as Spin's own memory.
install -d -m 0755 /opt/seckill/bin
install -m 0755 /etc/seckill/migrate-locked /opt/seckill/bin/migrate-locked
install -m 0755 /etc/seckill/spin-runtime-config /opt/seckill/bin/spin-runtime-config
cat >/opt/seckill/bin/start <<'START'
#!/bin/bash
set -euo pipefail
for pair in $SECKILL_SECRET_ARNS; do
  name=${pair%%=*}
  value=$(aws secretsmanager get-secret-value --region "$SECKILL_REGION" --secret-id "${pair#*=}" \
    --query SecretString --output text)
  export "SPIN_VARIABLE_${name^^}=$value"
done
# Migrations first (idempotent, serialised by an advisory lock across instances), verifying the
# server's certificate against the RDS CA.
url=${SPIN_VARIABLE_PG_URL/sslmode=require/sslmode=verify-full}
PG_URL="$url&sslrootcert=/etc/seckill/rds-ca.pem" /opt/seckill/bin/migrate-locked /opt/seckill/app/migrations
# Every variable of the manifest, secrets included, into the static provider's file (0600).
config=${RUNTIME_DIRECTORY:-/run/seckill}/runtime-config.toml
/opt/seckill/bin/spin-runtime-config /opt/seckill/app/spin.toml "$config"
while read -r name; do unset "$name"; done < <(compgen -e | grep '^SPIN_VARIABLE_' || true)
unset RUST_BACKTRACE
export RUST_LIB_BACKTRACE=0
cd /opt/seckill/app
exec spin up -f spin.toml --listen "0.0.0.0:$SECKILL_APP_PORT" --log-dir "" --runtime-config-file "$config"
START
chmod 0755 /opt/seckill/bin/start

cat >/etc/systemd/system/seckill.service <<UNIT
[Unit]
Description=seckill (spin up -f spin.toml, with the cron trigger)
Wants=network-online.target
After=network-online.target

[Service]
User=seckill
Group=seckill
Environment=HOME=/opt/seckill
Environment=SSL_CERT_FILE=$CA_BUNDLE
Environment=RUST_LIB_BACKTRACE=0
EnvironmentFile=/etc/seckill/boot.env
UnsetEnvironment=RUST_BACKTRACE
RuntimeDirectory=seckill
RuntimeDirectoryMode=0700
ExecStart=/opt/seckill/bin/start
Restart=always
RestartSec=2
LimitNOFILE=65536
NoNewPrivileges=true
ProtectSystem=full
PrivateTmp=true

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now seckill.service
echo "seckill boot: done"

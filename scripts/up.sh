#!/usr/bin/env bash
# The local stack, like `spin up`: sets up what is missing, starts redis-server and PostgreSQL in
# .data/ on loopback (reused if already running), builds everything and serves the app on
# http://127.0.0.1:3000 until Ctrl-C, paid through the test kit's Stripe sandbox as the local
# payment provider (the way Stripe's test mode stands in for live: no account anywhere). Its
# landing page, http://127.0.0.1:3000/, lists the sales; a person signs in as any buyer through
# the storefront's demo sign-in, which this script switches on (loopback only), or with a token
# from `target/release/seckill-admin buyer-token NAME`.
# Ports: SECKILL_REDIS_PORT (6379), SECKILL_PG_PORT (5432), SECKILL_LISTEN (127.0.0.1:3000),
# SECKILL_PROVIDER_LISTEN (127.0.0.1:3100). Extra arguments go to `seckill-host up`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bash "$ROOT/scripts/setup.sh"
LISTEN=${SECKILL_LISTEN:-127.0.0.1:3000}
DATA="$ROOT/.data"
start_stores "$DATA" "${SECKILL_REDIS_PORT:-6379}" "${SECKILL_PG_PORT:-5432}"

log "building components, host, the payment sandbox and the CLI"
build_app
(cd "$ROOT" && cargo build --quiet --release -p seckill-dev -p seckill-admin)

# Local secrets, made once: the demo shop's JWT key, the admission HMAC key, and one operator,
# `local`, whose secret (after `local:operator:`) is the admin token.
if [ ! -f "$DATA/secrets.env" ]; then
  umask 077
  {
    echo "SPIN_VARIABLE_JWT_SECRET=$(secret 32)"
    echo "SPIN_VARIABLE_ADMISSION_SECRET=$(secret 32)"
  } > "$DATA/secrets.env"
fi
if ! grep -q '^SPIN_VARIABLE_OPERATORS=' "$DATA/secrets.env"; then
  echo "SPIN_VARIABLE_OPERATORS=local:operator:$(secret 24)" >> "$DATA/secrets.env"
fi
if ! grep -q '^SPIN_VARIABLE_PAYMENT_WEBHOOK_SECRETS=' "$DATA/secrets.env"; then
  echo "SPIN_VARIABLE_PAYMENT_WEBHOOK_SECRETS=whsec_$(secret 24)" >> "$DATA/secrets.env"
fi
set -a; source "$DATA/secrets.env"; set +a
log "admin token (SPIN_VARIABLE_OPERATORS, after local:operator:) and JWT key: $DATA/secrets.env"

# A person signs in as any buyer here: the storefront's demo sign-in (`demo_login=true` in the
# `settings` variable), switched on by this script for a stack on loopback only, never by a
# request; the manifest's default, for every deployment, stays off. The settings already given
# (SPIN_VARIABLE_SETTINGS, else the one in .env) are kept, and a demo_login among them wins.
if [ -n "${SPIN_VARIABLE_SETTINGS+set}" ]; then
  SETTINGS=$SPIN_VARIABLE_SETTINGS
elif [ -f "$ROOT/.env" ]; then
  SETTINGS=$(sed -n 's/^SPIN_VARIABLE_SETTINGS=//p' "$ROOT/.env" | tail -n1 | tr -d "\"'")
else
  SETTINGS=""
fi
case "${LISTEN%:*}" in
  127.*|localhost|\[::1\]) LOOPBACK=1 ;;
  *) LOOPBACK=0 ;;
esac
if [[ ",${SETTINGS// /}," == *,demo_login=* ]]; then
  :
elif [ "$LOOPBACK" = 1 ]; then
  SETTINGS="${SETTINGS:+$SETTINGS,}demo_login=true"
  log "demo sign-in on (any name is a buyer): http://$LISTEN/ lists the sales; or mint a token: target/release/seckill-admin buyer-token NAME"
else
  log "demo sign-in off: $LISTEN is not a loopback address (mint a token: target/release/seckill-admin buyer-token NAME)"
fi
export SPIN_VARIABLE_SETTINGS="$SETTINGS"

# The payment provider: the sandbox's API and hosted checkout, its events to our webhook.
PROVIDER=${SECKILL_PROVIDER_LISTEN:-127.0.0.1:3100}
DEV="$ROOT/target/release/seckill-dev"
"$DEV" provider --listen "$PROVIDER" --webhook "http://$LISTEN/api/payments/webhook" \
  --secret "${SPIN_VARIABLE_PAYMENT_WEBHOOK_SECRETS%%,*}" &
PROVIDER_PID=$!
trap 'kill "$PROVIDER_PID" 2>/dev/null || true' EXIT
export SPIN_VARIABLE_PAYMENT_API_URL="http://$PROVIDER"
SPIN_VARIABLE_PAYMENT_API_KEY=$("$DEV" provider --print-key)
export SPIN_VARIABLE_PAYMENT_API_KEY

log "serving on http://$LISTEN, payments at http://$PROVIDER (its dashboard: http://$PROVIDER/dashboard; Ctrl-C stops both; scripts/down.sh stops Redis and Postgres)"
"$ROOT/target/release/seckill-host" up --manifest "$ROOT/spin.toml" --listen "$LISTEN" "$@"

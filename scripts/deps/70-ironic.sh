# Sourced by scripts/install-deps (bash, set -euo pipefail). OpenStack Ironic (the `ironic`
# deploy backend's engine, started by the tests, the benchmark and `provision lab up --backend
# ironic`) runs from its own venv: its pins (oslo.*, SQLAlchemy, eventlet) conflict with the
# project's. Idempotent: the venv is rebuilt only when the wanted versions change.
IRONIC_VENV="${PROVISIONER_IRONIC_VENV:-${VENV}-ironic}"
ironic_want='ironic==39.0.0 sushy>=5.0'
ironic_stamp="$IRONIC_VENV/.provisioner-ironic"
if [ "$(cat "$ironic_stamp" 2>/dev/null)" != "$ironic_want" ] || [ ! -x "$IRONIC_VENV/bin/ironic" ]; then
  log "ironic: creating $IRONIC_VENV ($ironic_want)"
  "$PY" -m venv --clear "$IRONIC_VENV"
  # shellcheck disable=SC2086  # the wanted specs are words
  "$IRONIC_VENV/bin/pip" install -q $ironic_want || die "pip install of Ironic failed"
  echo "$ironic_want" > "$ironic_stamp"
else
  log "ironic: $IRONIC_VENV up to date"
fi
unset ironic_want ironic_stamp

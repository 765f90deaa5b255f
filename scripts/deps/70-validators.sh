# Sourced by scripts/install-deps (bash, set -euo pipefail). DMTF's Redfish Service Validator
# and Protocol Validator, which check the project's Redfish stand-ins (provisioner/testing/) in
# the tests: in their own venv (their pins are not the project's), with the DMTF schema bundle
# (CSDL, DSP8010) unpacked beside them from tests/fixtures/redfish-csdl, since the validators
# cannot download schemas here. Idempotent: reinstalls only when the pins or the bundle change.
validators_venv="${PROVISIONER_VALIDATORS_VENV:-$(dirname "$VENV")/.venv-validators}"
validators_pins="redfish-service-validator==3.1.8 redfish-protocol-validator==1.3.2"
validators_bundle="$ROOT/tests/fixtures/redfish-csdl/dsp8010-2025.4-csdl.tar.xz"
validators_want="$(printf '%s %s' "$validators_pins" "$(sha256sum "$validators_bundle" | cut -d' ' -f1)")"
if [ "$(cat "$validators_venv/.provisioner-validators" 2>/dev/null)" != "$validators_want" ]; then
  log "validators: installing $validators_pins into $validators_venv"
  "$PY" -m venv --clear "$validators_venv"
  # shellcheck disable=SC2086
  "$validators_venv/bin/pip" install -q $validators_pins || die "pip install of the validators failed"
  tar -C "$validators_venv" -xJf "$validators_bundle"
  printf '%s\n' "$validators_want" > "$validators_venv/.provisioner-validators"
fi
unset validators_venv validators_pins validators_bundle validators_want

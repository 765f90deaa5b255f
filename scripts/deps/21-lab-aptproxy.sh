# Sourced by scripts/install-deps (bash, set -euo pipefail). Debian's apt-cacher-ng package
# enables a system-wide proxy on *:3142 where systemd runs; `provision lab up` runs one proxy
# per lab on its uplink address and port 3142 (provisioner/lab/aptproxy.py), which that
# wildcard listener would block. Idempotent: a disabled or absent service is left alone, and
# machines without systemd (the lab machines) never start it.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ] \
    && systemctl is-enabled --quiet apt-cacher-ng 2>/dev/null; then
  systemctl disable --now apt-cacher-ng
  log "lab: disabled the system-wide apt-cacher-ng service (each lab runs its own on its uplink)"
fi

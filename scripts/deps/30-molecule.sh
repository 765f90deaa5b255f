# Sourced by scripts/install-deps (bash, set -euo pipefail). Configures podman for molecule
# on these machines: runc as the runtime (crun fails on this cgroup set-up) and no default
# ulimits (every run otherwise fails on setrlimit). A drop-in, so others' containers.conf
# stays untouched. Idempotent: rewrites the drop-in only when its content differs.
molecule_podman_conf=/etc/containers/containers.conf.d/30-provisioner-molecule.conf
molecule_podman_want='# Written by provisioner scripts/deps/30-molecule.sh (molecule on podman).
[containers]
default_ulimits = []

[engine]
runtime = "runc"'
if [ "$(cat "$molecule_podman_conf" 2>/dev/null)" != "$molecule_podman_want" ]; then
  mkdir -p "$(dirname "$molecule_podman_conf")"
  printf '%s\n' "$molecule_podman_want" > "$molecule_podman_conf"
  log "molecule: wrote $molecule_podman_conf"
fi
unset molecule_podman_conf molecule_podman_want

# Sourced by scripts/install-deps (bash, set -euo pipefail): checks that this machine can run
# the virtual lab and says exactly what is missing. Idempotent and read-only apart from two
# runtime directories. libvirtd/virtlogd are not started here: there is no systemd on the lab
# machines, so `provision lab up` starts them on demand and `provision lab down` stops them.
mkdir -p /var/log/libvirt /var/run/libvirt
lab_missing="$("$VENV/bin/python" -c '
from provisioner.lab.daemons import missing_tools
print("; ".join(missing_tools("uefi")))
' 2>&1)" || lab_missing="cannot import provisioner.lab (${lab_missing})"
for lab_tool in tcpdump dnsmasq; do
  command -v "$lab_tool" >/dev/null || lab_missing="${lab_missing:+$lab_missing; }$lab_tool"
done
getent passwd libvirt-qemu >/dev/null || lab_missing="${lab_missing:+$lab_missing; }user libvirt-qemu (libvirt-daemon-system)"
if [ -n "$lab_missing" ]; then
  die "the virtual lab cannot run on this machine; missing: $lab_missing"
fi
log "lab: qemu, libvirt, iPXE/OVMF firmware, sushy-tools and libvirt-python present (libvirtd starts with \`provision lab up\`)"
unset lab_missing lab_tool

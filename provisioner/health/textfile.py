"""node_exporter textfile-collector output: the same verdicts, for Prometheus."""

from __future__ import annotations

import shlex

from provisioner.health.model import HostReport, Severity, Status
from provisioner.safetext import prom_label

TEXTFILE_NAME = "provisioner_health.prom"
_SEVERITY = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


def render_textfile(report: HostReport, finished_at: float) -> str:
    """Prometheus text exposition of one host's report."""
    h = prom_label(report.host)
    lines = [
        "# HELP node_health_check 1 when the provisioner health check passed or does not apply.",
        "# TYPE node_health_check gauge",
    ]
    for r in report.results:
        ok = 1 if r.status in (Status.PASS, Status.NOT_APPLICABLE) else 0
        lines.append(f'node_health_check{{check="{prom_label(r.id)}",host="{h}",status="{r.status.value}"}} {ok}')
    lines += [
        "# HELP node_health_check_severity Severity of the check's finding: 0 info, 1 warning, 2 critical.",
        "# TYPE node_health_check_severity gauge",
    ]
    for r in report.results:
        lines.append(
            f'node_health_check_severity{{check="{prom_label(r.id)}",host="{h}"}} {_SEVERITY[r.severity]}'
        )
    lines += [
        "# HELP node_health_verdict 1 for the host's current verdict.",
        "# TYPE node_health_verdict gauge",
        f'node_health_verdict{{host="{h}",verdict="{report.verdict.value}",'
        f'remedy="{report.remedy.kind.value}"}} 1',
        "# HELP node_health_clean_streak Consecutive clean health runs of the host.",
        "# TYPE node_health_clean_streak gauge",
        f'node_health_clean_streak{{host="{h}"}} {report.clean_streak}',
        "# HELP node_health_last_run_timestamp_seconds When the last health run finished.",
        "# TYPE node_health_last_run_timestamp_seconds gauge",
        f'node_health_last_run_timestamp_seconds{{host="{h}"}} {finished_at:.3f}',
    ]
    return "\n".join(lines) + "\n"


def install_command(directory: str) -> str:
    """Remote shell command writing stdin to the textfile atomically (temp file + rename in the
    same directory, so node_exporter never reads half a file)."""
    d = shlex.quote(directory.rstrip("/") or "/")
    final = shlex.quote(f"{directory.rstrip('/')}/{TEXTFILE_NAME}")
    sudo = 'if [ "$(id -u)" = 0 ]; then S=""; else S="sudo -n"; fi'
    return (
        f"{sudo}; $S mkdir -p {d} && t=$($S mktemp {d}/.{TEXTFILE_NAME}.XXXXXX) && "
        f'$S tee "$t" >/dev/null && $S chmod 0644 "$t" && $S mv -f "$t" {final}'
    )

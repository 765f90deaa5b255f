"""Running the external tools the image and ramdisk builders use, with errors a user can act on."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

from provisioner.events import Event, emit
from provisioner.exceptions import DeployError, NotReady


def require_tools(*tools: str) -> None:
    """Raise NotReady naming every missing tool at once."""
    missing = [t for t in tools if shutil.which(t) is None and not Path(t).exists()]
    if missing:
        raise NotReady(
            f"missing tools: {', '.join(missing)}",
            hint="run scripts/install-deps as root (it installs scripts/deps/50-deploy.list)",
        )


def run(
    cmd: Sequence[str | Path],
    *,
    what: str,
    cwd: Path | None = None,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 1800,
) -> str:
    """Run a command; on failure raise DeployError with ``what`` and the end of its output."""
    argv = [str(c) for c in cmd]
    emit(Event("stage", what, data={"command": argv[0]}))
    lines: list[str] = []
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except FileNotFoundError as exc:
        raise NotReady(
            f"{what}: {argv[0]} is not installed", hint="run scripts/install-deps as root"
        ) from exc
    # the tool's lines go out as they come (debootstrap runs for minutes), so a deadline kills
    # it from a timer instead of a blocking communicate()
    expired = threading.Event()

    def _expire() -> None:
        expired.set()
        proc.kill()

    timer = threading.Timer(timeout, _expire)
    timer.daemon = True
    timer.start()
    try:
        if input is not None and proc.stdin is not None:
            proc.stdin.write(input)
            proc.stdin.close()
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            lines.append(line)
            if line.strip():
                emit(Event("output", line.strip(), data={"stage": what}))
        code = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if expired.is_set():
        raise DeployError(f"{what}: `{argv[0]}` did not finish within {timeout:.0f} s")
    out = "\n".join(lines) + ("\n" if lines else "")
    if code != 0:
        tail = "\n".join(out.strip().splitlines()[-15:])
        raise DeployError(f"{what} failed (exit {code}): {' '.join(argv[:4])} ...\n{tail}")
    return out

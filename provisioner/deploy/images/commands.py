"""Running the external tools the image and ramdisk builders use, with errors a user can act on."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

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
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            input=input,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise NotReady(
            f"{what}: {argv[0]} is not installed", hint="run scripts/install-deps as root"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise DeployError(f"{what}: `{argv[0]}` did not finish within {timeout:.0f} s") from exc
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(out.strip().splitlines()[-15:])
        raise DeployError(
            f"{what} failed (exit {proc.returncode}): {' '.join(argv[:4])} ...\n{tail}"
        )
    return out

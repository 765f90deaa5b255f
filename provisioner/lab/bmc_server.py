"""Entry point of one lab BMC: sushy-emulator, with drives that report their real serials.

sushy-tools' drive template hard-codes one serial number for every drive; discovery of the
root disk by serial needs the real ones, so this launcher puts the lab's own drive.json in
front of sushy's templates and then runs sushy-emulator's normal ``main``.
Run as ``python -m provisioner.lab.bmc_server --config FILE`` (inside the lab namespace).
"""

from __future__ import annotations

import sys
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"


def main(argv: list[str] | None = None) -> int:
    """Run sushy-emulator with the lab's template overrides."""
    from jinja2 import ChoiceLoader, FileSystemLoader
    from sushy_tools.emulator import main as sushy

    base = sushy.app.jinja_loader
    loaders = [FileSystemLoader(str(TEMPLATES))] + ([base] if base is not None else [])
    sushy.app.jinja_loader = ChoiceLoader(loaders)
    sys.argv = ["sushy-emulator", *(sys.argv[1:] if argv is None else argv)]
    return int(sushy.main() or 0)


if __name__ == "__main__":
    sys.exit(main())

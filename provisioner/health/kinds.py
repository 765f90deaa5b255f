"""The remedy kinds, apart from the pydantic models: `provision hosts --help` offers them
as choices without loading pydantic (tests/unit/cli/test_cli_lazy.py)."""

from __future__ import annotations

from enum import StrEnum


class RemedyKind(StrEnum):
    """What to do about a finding, cheapest first; a host's remedy is the worst of its checks."""

    NONE = "none"
    RESET_GPU = "reset_gpu"
    REBOOT = "reboot"
    REIMAGE = "reimage"
    REPAIR = "repair"  # hardware work order: the part is named in Remedy.part

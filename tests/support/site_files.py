"""Broken copies of the example site, and where a text sits in them (for errors' file:line)."""

from __future__ import annotations

from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "inventory" / "example" / "site.yml"


def broken_copy(tmp_path: Path, old: str, new: str, count: int = 1) -> Path:
    """A copy of the example site with one textual change."""
    text = EXAMPLE.read_text()
    assert old in text, old
    site_dir = tmp_path / "broken"
    site_dir.mkdir()
    (site_dir / "site.yml").write_text(text.replace(old, new, count))
    return site_dir / "site.yml"


def line_of(path: Path, needle: str, nth: int = 1) -> int:
    """The line number of the nth line of `path` that contains `needle`."""
    hits = [i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line]
    return hits[nth - 1]

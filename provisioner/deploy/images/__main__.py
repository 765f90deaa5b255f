"""``python -m provisioner.deploy.images [--format raw|qcow2]``: build (or find) the lab image and
print what a site file's ``settings.image`` needs to serve it from elsewhere."""

from __future__ import annotations

import argparse
import json
import sys

from provisioner.deploy.images.builder import ImageRecipe, build_lab_image
from provisioner.events import Event, sinks
from provisioner.exceptions import ProvisionerError


class _Stages:
    """Prints each build stage on stderr as it starts (stdout keeps the JSON)."""

    def emit(self, event: Event) -> None:
        if event.kind == "stage":
            step = event.data.get("step")
            of = f"[{step}/{event.data['steps']}] " if step is not None else ""
            print(f"image: {of}{event.message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Build the image and print its path, format, size and sha256 as JSON."""
    parser = argparse.ArgumentParser(prog="python -m provisioner.deploy.images")
    parser.add_argument("--format", choices=("raw", "qcow2"), default="raw")
    args = parser.parse_args(argv)
    try:
        with sinks(_Stages()):
            img = build_lab_image(ImageRecipe(format=args.format))
    except ProvisionerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    print(
        json.dumps(
            {
                "url": str(img.path),
                "format": img.format,
                "sha256": img.sha256,
                "size_bytes": img.size_bytes,
                "kernel": img.kernel,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

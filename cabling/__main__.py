"""``python -m cabling ...``: the cabling commands alone, without loading the rest of provisioner."""

from cabling.cli import cabling_app

cabling_app(prog_name="python -m cabling")

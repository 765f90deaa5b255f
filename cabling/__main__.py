"""``python -m cabling ...``: the cabling commands alone, without loading the rest of provisioner."""

from cabling import cli

# The process ends with the command (see cli.run_and_exit).
cli.run_and_exit(lambda: cli.cabling_app(prog_name="python -m cabling"))

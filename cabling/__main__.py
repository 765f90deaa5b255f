"""``python -m cabling ...``: the cabling commands alone, without loading the rest of provisioner."""

import gc

gc.disable()  # see cli.run_and_exit: this process ends with its command

from cabling import cli  # noqa: E402

# The process ends with the command (see cli.run_and_exit).
cli.run_and_exit(lambda: cli.cabling_app(prog_name="python -m cabling"))

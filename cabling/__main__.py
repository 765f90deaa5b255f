"""``python -m cabling ...``: the cabling commands alone, without loading the rest of provisioner."""

import os
import sys

from cabling import cli

# The process ends with the command: flush what it printed and exit without freeing every object
# and collecting garbage one last time (a fifth of the run on a 4,000-GPU fabric). Files the
# command wrote are closed by then; nothing registers exit handlers.
cli.KEEP_UNTIL_EXIT = True
try:
    cli.cabling_app(prog_name="python -m cabling")
    code = 0
except SystemExit as exc:
    if exc.code is None or isinstance(exc.code, int):
        code = exc.code or 0
    else:
        sys.stderr.write(f"{exc.code}\n")
        code = 1
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)

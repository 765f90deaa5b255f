"""The ``provision`` command line: parses arguments, calls the workflow, maps errors to exit codes."""

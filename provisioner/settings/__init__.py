"""Settings models owned by the deploy backends, kept below the inventory so the site schema
can type each backend's block (the inventory never imports deploy/); defaults written once here."""

# The hosts' provisioning link speed when a backend's block does not give it: 10 GbE.
DEFAULT_HOST_LINK_GBPS = 10.0

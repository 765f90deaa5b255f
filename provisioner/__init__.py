"""provisioner: bring racks of bare-metal GPU servers up to a training-ready cluster."""

__version__ = "0.1.0"

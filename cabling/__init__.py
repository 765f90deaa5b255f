"""InfiniBand/RoCE cabling: wiring manifests, plan generation, lint, and validation against discovery.

Independent of :mod:`provisioner` so it can run alone in a switch-side CI job.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"

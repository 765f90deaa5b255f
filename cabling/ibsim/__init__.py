"""The real InfiniBand management stack over a simulated fabric: a manifest's fabric as it is
actually cabled (:mod:`cabling.ibsim.netfile`), run by ibsim with OpenSM and infiniband-diags
against it (:mod:`cabling.ibsim.simulator`). The tests, ``benchmarks/cabling.py`` and anyone
rehearsing ``validate`` before the hardware exists use it."""

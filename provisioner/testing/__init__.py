"""Real peers (Redfish emulators, a BMC fault proxy) shared by the tests and the benchmarks."""

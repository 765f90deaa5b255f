"""Per-host steps and the rack runner: bounded concurrency, waves, retries, resume."""

"""nfvperf.store."""

"""nfvperf.host."""

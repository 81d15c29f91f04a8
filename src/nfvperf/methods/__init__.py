"""nfvperf.methods."""

"""nfvperf.search."""

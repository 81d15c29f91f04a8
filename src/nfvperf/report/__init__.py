"""nfvperf.report."""

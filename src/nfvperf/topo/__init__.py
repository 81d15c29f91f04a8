"""nfvperf.topo."""

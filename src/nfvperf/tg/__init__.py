"""nfvperf.tg."""

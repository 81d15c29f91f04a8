"""nfvperf.dut."""

"""nfvperf: automated, repeatable data-plane benchmarks for NFV infrastructure."""
__version__ = "0.1.0"

"""nfvperf.host: what a run needs from the Linux host.

run.py (RunContext, ResourceTracker), netns.py (namespaces, veth), hugepages.py, cpu.py (topology,
pinning plan), preflight.py (checks), cleanup.py (leftovers of killed runs).
"""

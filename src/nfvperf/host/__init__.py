"""nfvperf.host: what a run needs from the Linux host.

run.py (RunContext, ResourceTracker), proc.py (Process, LocalHost: every process), netns.py
(namespaces, veth, bridges), hugepages.py, cpu.py (topology,
pinning plan), preflight.py (checks), cleanup.py (leftovers of killed runs).
"""

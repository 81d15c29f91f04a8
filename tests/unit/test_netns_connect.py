"""nfvperf.host.netns.connect_in_netns: the controller's TCP connection to an address that exists
only in a network namespace of this machine (a testbed guest's management NIC); the process
itself stays in its own namespace."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from nfvperf.host.netns import connect_in_netns, create_netns, delete_netns, run_in_netns
from nfvperf.host.run import RunContext

pytestmark = pytest.mark.root

SERVER = """
import socket, sys
s = socket.socket(); s.bind(("10.254.9.2", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); c.sendall(b"hello from the namespace"); c.close()
"""


def test_a_connection_made_inside_a_namespace():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    ns = RunContext().netns("cx")
    create_netns(ns)
    try:
        run_in_netns(ns, ["ip", "addr", "add", "10.254.9.2/32", "dev", "lo"])
        run_in_netns(ns, ["ip", "link", "set", "lo", "up"])
        srv = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", SERVER],
                               stdout=subprocess.PIPE, text=True)
        try:
            assert srv.stdout is not None
            port = int(srv.stdout.readline())
            before = os.readlink("/proc/thread-self/ns/net")
            with connect_in_netns(ns, "10.254.9.2", port, timeout=5) as s:
                assert s.recv(100) == b"hello from the namespace"
            assert os.readlink("/proc/thread-self/ns/net") == before     # the caller stays
            with pytest.raises(OSError):                # the address is nowhere else
                socket.create_connection(("10.254.9.2", port), timeout=1).close()
            with pytest.raises(OSError, match="setns|No such file"):
                connect_in_netns(ns + "-none", "10.254.9.2", port, timeout=1)
        finally:
            srv.kill()
            srv.wait()
    finally:
        delete_netns(ns)

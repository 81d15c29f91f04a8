"""What a run does with its testbed before and after the trials (issue 10 items 1 and 4): check
that the run's measurer can drive its hosts, take the testbed's lock in the results store (waiting if
asked), and what the run records about it (never a key path, a host key or a token)."""
from __future__ import annotations

from typing import Callable, Optional

from nfvperf.store.db import Store
from nfvperf.store.lock import HeldLock, acquire
from nfvperf.testbed.spec import TestbedSpec


def remote_hosts_problem(testbed: TestbedSpec, tg: str) -> Optional[str]:
    """None when the run can go ahead on ``testbed`` with ``tg``, else why not.

    ``--tg sim`` touches no host (the DUT is modelled); ``--tg tgen`` runs the generator on the
    tester host and the DUT on the DUT host (over SSH for hosts that are not ``local: true``);
    the other measurers (iperf3) run only on this machine."""
    if tg in ("sim", "tgen"):
        return None
    ssh = [n for n, h in testbed.hosts.items() if not h.local and h.guest is None]
    guests = [n for n, h in testbed.hosts.items() if h.guest is not None]
    if not ssh and not guests:
        return None
    where = []
    if ssh:
        where.append(f"host(s) {', '.join(ssh)} are reached over SSH")
    if guests:
        where.append(f"host(s) {', '.join(guests)} are QEMU guests nfvperf boots (reached through "
                     "their serial console)")
    return (f"testbed {testbed.name}: {' and '.join(where)}, and --tg {tg} runs only on this "
            f"machine: use --tg tgen (or --tg sim) on this testbed")


def hold_testbed(store: Store, testbed: TestbedSpec, run_uid: str, *, wait_s: float = 0.0,
                 say: Optional[Callable[[str], None]] = None) -> HeldLock:
    """Take ``testbed``'s lock for run ``run_uid``; raises :class:`nfvperf.store.lock.TestbedLocked`
    naming the holder when a live run has it (after ``wait_s`` seconds of waiting)."""
    lock = acquire(store, testbed.name, run_uid, wait_s=wait_s, say=say)
    if say:
        waited = f" after waiting {lock.waited_s:.0f} s" if lock.waited_s >= 1 else ""
        say(f"testbed {testbed.name}: locked for run nfv{run_uid}{waited}")
    return lock

